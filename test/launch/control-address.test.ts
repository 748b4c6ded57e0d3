/**
 * The coordinator's control address in the engine's cluster file is its node's own address, the one
 * the stages dial with their results, while its HTTP listener binds `[coordinator] host`. Here the
 * coordinator runs on node-2, away from stage 0, and serves HTTP on every interface (0.0.0.0): a
 * control address taken from the HTTP host would be that wildcard, which no stage can dial (a stage
 * on another machine would dial itself, as with 127.0.0.1; shard-engine refuses it outright).
 * An engine that binds every interface though it was given one address is said in the timeline, as
 * is a run folder on a full file system (a real tmpfs, filled: this runs as root).
 * Real sshd nodes on loopback addresses (lifecycle-fixture.ts). Needs `npm run build`.
 */
import { execFile } from "node:child_process";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import { promisify } from "node:util";
import { join } from "node:path";
import { parse } from "smol-toml";
import { afterAll, beforeAll, expect, test } from "vitest";
import { launchCluster, teardownCluster } from "../../src/launch/index.js";
import { freePort, makeContext, makeRequest, startLifecycleWorld, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;

beforeAll(async () => {
  world = await startLifecycleWorld();
});
afterAll(async () => {
  await world?.close();
});

test("a coordinator serving HTTP on 0.0.0.0 on another node than stage 0: its control address is its node's, and the pipeline answers", async () => {
  const host2 = world.hosts.get("node-2")!;
  const request = await makeRequest(world, { cluster: "control", register: false });
  request.coordinator = {
    ...request.coordinator,
    nodeName: "node-2",
    node: world.nodeFor("node-2"),
    bindHost: "0.0.0.0",
    controlHost: host2,
    httpPort: await freePort("0.0.0.0"),
  };
  const context = makeContext(world);
  const result = await launchCluster(request, context);
  const entry = (await world.ledger.read("control"))!;
  try {
    expect(result.timeline.map((e) => e.step)).toContain("readiness-probe-passed");
    // Given 0.0.0.0, it binds what it was given: nothing to say.
    expect(result.timeline.map((e) => e.step)).not.toContain("listening-wider");
    const written = parse(await readFile(join(request.coordinator.runDir, request.driver.clusterConfigName), "utf8")) as {
      nodes: Array<{ role: string; address: string }>;
    };
    const control = entry.ports.find((p) => p.purpose === "control")!;
    expect(control).toMatchObject({ node: "node-2", host: host2 });
    expect(written.nodes.find((n) => n.role === "hybrid")!.address).toBe(`${host2}:${control.port}`);
    expect(entry.ports.find((p) => p.purpose === "http")).toMatchObject({ host: "0.0.0.0", port: request.coordinator.httpPort });
    const response = await fetch(`${result.coordinatorUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "hello", max_tokens: 2 }) });
    expect(response.status).toBe(200);
  } finally {
    await teardownCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
  }
});

test("a coordinator that binds 0.0.0.0 though it was given its node's address: the launch serves and says so in its timeline", async () => {
  const request = await makeRequest(world, { cluster: "wider", register: false, binary: world.standIns.coordinatorBindsEverywhere });
  const result = await launchCluster(request, makeContext(world));
  const entry = (await world.ledger.read("wider"))!;
  try {
    const said = result.timeline.filter((e) => e.step === "listening-wider").map((e) => e.detail);
    expect(said).toEqual([
      `coordinator on ${request.coordinator.nodeName} listens on 0.0.0.0:${request.coordinator.httpPort}, every interface of the node, though it was given ${request.coordinator.bindHost}: it is reached from every network the node is on (its engine does not bind the address it is given)`,
    ]);
    expect(result.timeline.at(-1)?.step).toBe("ready");
  } finally {
    await teardownCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
  }
});

test("a stage's run folder on a file system with under 1 MiB free: the launch serves and says so in its timeline", async () => {
  const request = await makeRequest(world, { cluster: "full", register: false });
  const mount = join(world.root, "full-tmpfs");
  await mkdir(mount, { recursive: true });
  const run = promisify(execFile);
  await run("mount", ["-t", "tmpfs", "-o", "size=4m", "tmpfs", mount]).catch((error: Error) => {
    throw new Error(`this test fills a small tmpfs, which needs root and mount(8): ${error.message}`, { cause: error });
  });
  let entry;
  try {
    // 3.5 MiB of the 4 taken: the launch files (a few KiB) fit, a log would not for long.
    await writeFile(join(mount, "filler"), Buffer.alloc(3.5 * 1024 * 1024, 1));
    const runDir = join(mount, "stage-1");
    await mkdir(runDir);
    request.stages[1] = { ...request.stages[1]!, runDir };
    const result = await launchCluster(request, makeContext(world));
    entry = (await world.ledger.read("full"))!;
    const said = result.timeline.filter((e) => e.step === "run-folder-full").map((e) => e.detail);
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(new RegExp(`^the file system holding ${runDir} on node-2 has \\d+ KiB free: `));
    expect(result.timeline.at(-1)?.step).toBe("ready");
  } finally {
    if (entry !== undefined) await teardownCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
    await run("umount", ["-l", mount]).catch(() => undefined);
  }
});
