/**
 * Launch, serving and teardown end to end on loopback SSH nodes: a 2-stage reference cluster
 * launches in order, answers chat completions through the embedded router (official openai client,
 * streaming and not), and a `kill -9` of a stage deregisters it and tears everything down, checked
 * with ps on every node. Needs `npm run build` (the engine runs from dist/).
 */
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { observeCluster } from "../../src/health/index.js";
import { launchCluster, superviseCluster, teardownCluster, type LedgerEntry, type SupervisionOutcome } from "../../src/launch/index.js";
import { coordinatorStatusSchema, stageCardSchema } from "../../src/reconciler/status/schema.js";
import { enginePidOf, makeContext, makeRequest, processesMentioning, startLifecycleWorld, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;

beforeAll(async () => {
  world = await startLifecycleWorld();
});
afterAll(async () => {
  await world?.close();
});

describe("a 2-stage reference cluster on loopback SSH nodes", () => {
  let entry: LedgerEntry;
  let coordinatorUrl = "";
  const context = () => makeContext(world);
  let ctx: ReturnType<typeof context>;

  it("launches in order: stages ascending, each listening, then coordinator, health, probe, router", async () => {
    ctx = context();
    const request = await makeRequest(world, { cluster: "alpha" });
    const result = await launchCluster(request, ctx);
    coordinatorUrl = result.coordinatorUrl;
    const steps = result.timeline.map((e) => e.step);
    expect(steps).toEqual([
      "launch-started",
      "ports-allocated",
      "launch-files-written",
      "stage-0-started",
      "stage-1-started",
      "stage-0-listening",
      "stage-1-listening",
      "coordinator-started",
      "coordinator-healthy",
      "readiness-probe-passed",
      "router-registered",
      "ready",
    ]);
    // Timestamps never go backwards.
    const times = result.timeline.map((e) => Date.parse(e.at));
    expect(times).toEqual([...times].sort((a, b) => a - b));
    entry = (await world.ledger.read("alpha"))!;
    expect(entry.phase).toBe("running");
    expect(entry.processes.map((p) => `${p.role}${p.index ?? ""}@${p.node}`)).toEqual(["stage0@node-1", "stage1@node-2", "coordinator@node-1"]);
    expect(await world.registrar.lookup("alpha")).toMatchObject({ url: coordinatorUrl, models: [world.modelName] });
  });

  it("is Healthy, with stage cards that fit the status schema", async () => {
    const observation = await observeCluster(entry, {
      nodeFor: world.nodeFor,
      layers: [
        [0, 2],
        [2, 4],
      ],
    });
    expect(observation.problems).toEqual([]);
    expect(observation.health).toBe("Healthy");
    expect(observation.stages.map((s) => [s.index, s.node, s.layers, s.alive, s.transport])).toEqual([
      [0, "node-1", [0, 2], true, "listening"],
      [1, "node-2", [2, 4], true, "listening"],
    ]);
    for (const card of observation.stages) stageCardSchema.parse(card);
    coordinatorStatusSchema.parse(observation.coordinator);
    expect(observation.coordinator?.health).toBe("ok");
  });

  it("answers a chat completion through the embedded router, streaming and not", async () => {
    const client = new OpenAI({ baseURL: `${world.router.url}/v1`, apiKey: "unused", maxRetries: 0 });
    // The router reloads its YAML asynchronously after registration.
    const deadline = Date.now() + 5_000;
    while ((await fetch(`${world.router.url}/v1/models`).then((r) => r.json() as Promise<{ data: unknown[] }>)).data.length === 0) {
      if (Date.now() > deadline) throw new Error("router never listed the model");
      await new Promise((r) => setTimeout(r, 20));
    }
    const completion = await client.chat.completions.create({ model: world.modelName, messages: [{ role: "user", content: "Hello" }], max_tokens: 4, temperature: 0 });
    expect(completion.choices[0]?.message.role).toBe("assistant");
    expect(completion.usage?.completion_tokens).toBeGreaterThan(0);

    const stream = await client.chat.completions.create({
      model: world.modelName,
      messages: [{ role: "user", content: "Hello" }],
      max_tokens: 4,
      temperature: 0,
      stream: true,
    });
    let chunks = 0;
    let text = "";
    let finish: string | null | undefined;
    for await (const chunk of stream) {
      chunks++;
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    expect(chunks).toBeGreaterThan(1);
    expect(finish).toBeDefined();
    // Greedy decoding: the stream says what the plain completion said.
    expect(text).toBe(completion.choices[0]?.message.content);
  });

  // How fast this happens is measured by `npm run bench -- lifecycle` (goal ≤ 1 s), not asserted here:
  // a timed test on a shared machine is noise.
  it("kill -9 of a stage: deregistered and torn down, no process left on any node", async () => {
    const supervision = superviseCluster(entry, {
      ledger: world.ledger,
      registrar: world.registrar,
      nodeFor: world.nodeFor,
      graceMs: 2_000,
      monitor: { pollIntervalMs: 200 },
    });
    const stage1 = entry.processes.find((p) => p.role === "stage" && p.index === 1)!;
    const node2 = world.nodeFor("node-2");
    const engine = await enginePidOf(node2, stage1.pid);
    expect((await node2.run(["kill", "-9", String(engine)])).exitCode).toBe(0);
    const outcome: SupervisionOutcome = await supervision.ended;
    await supervision.stop();
    // Stage-0 loses its link to stage-1 and exits too: whichever exit is seen first is reported.
    expect(outcome.death.reason).toBe("StageDied");
    expect(outcome.death.label).toMatch(/^stage-[01]$/);
    expect(outcome.teardown.ok).toBe(true);
    expect(await world.registrar.lookup("alpha")).toBeUndefined();
    expect(await world.ledger.read("alpha")).toBeUndefined();
    expect(await processesMentioning(world)).toEqual([]);
    // The launch's transport token went with it, on every node.
    for (const p of entry.processes) expect(await world.nodeFor(p.node).stat(`${p.runDir}/transport.token`)).toBeUndefined();
  });

  it("the router stops offering the model", async () => {
    const deadline = Date.now() + 5_000;
    for (;;) {
      const models = (await fetch(`${world.router.url}/v1/models`).then((r) => r.json())) as { data: unknown[] };
      if (models.data.length === 0) break;
      if (Date.now() > deadline) throw new Error("router still lists the model");
      await new Promise((r) => setTimeout(r, 20));
    }
    const response = await fetch(`${world.router.url}/v1/chat/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model: world.modelName, messages: [{ role: "user", content: "hi" }] }),
    });
    expect(response.status).toBe(404);
  });

  it("a relaunch keeps each process's previous log beside its own: what the member that died said is not erased", async () => {
    const stage1 = entry.processes.find((p) => p.role === "stage" && p.index === 1)!;
    const node2 = world.nodeFor("node-2");
    const died = (await node2.readFile(stage1.logFile)).toString("utf8");
    expect(died).not.toBe("");
    // In the run folders of the launch that died, as the daemon relaunches a cluster.
    const again = await makeRequest(world, { cluster: "alpha" });
    const runDirOf = (role: string, index?: number): string => entry.processes.find((p) => p.role === role && p.index === index)!.runDir;
    again.stages = again.stages.map((s) => ({ ...s, runDir: runDirOf("stage", s.index) }));
    again.coordinator = { ...again.coordinator, runDir: runDirOf("coordinator") };
    const relaunch = await launchCluster(again, context());
    try {
      expect((await node2.readFile(`${stage1.logFile}.previous`)).toString("utf8")).toBe(died);
      expect((await node2.readFile(stage1.logFile)).toString("utf8")).not.toBe(died);
    } finally {
      await teardownCluster((await world.ledger.read("alpha"))!, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
    }
    expect(relaunch.timeline.at(-1)?.step).toBe("ready");
  });
});
