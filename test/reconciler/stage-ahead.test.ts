/**
 * A serving cluster edited to a new model has the new files staged while the old revision serves:
 * a download that fails keeps the old revision serving (Ready stays its, its coordinator answers),
 * and the old revision is withdrawn and torn down only once every new file is in place. The daemon
 * runs in this process on two local nodes; the model comes from the local Hub stand-in.
 */
import { readdir, readFile, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { conditionOf, runShardctl, sleep, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

let hub: HubServer;
let newModel: string;

// Registered before the world's take-down, so it runs after it: the hub answers while the cluster is pruned.
afterAll(async () => {
  await hub?.close();
});

const dw = useDaemonWorld({
  settings: { enabled: true },
  prepare: async (world) => {
    newModel = join(world.root, "models", "six-layers");
    await makeTestModel(newModel, { layers: 6, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 21 });
    hub = await startHubServer({
      repos: [
        { repo: "test-org/old", commit: "1".repeat(40), dir: world.modelDir },
        { repo: "test-org/new", commit: "3".repeat(40), dir: newModel },
      ],
    });
    await writeFile(world.settingsFile, `[hub]\nendpoint = "${hub.endpoint}"\n\n${await readFile(world.settingsFile, "utf8")}`);
  },
});

test("a new model whose download fails: the old revision keeps serving, and is replaced only once the new files are staged", async () => {
  const { world } = dw;
  const { port, portRange } = await dw.freeAddresses();
  const oldRevision = await dw.define("upgraded", { nodes: ["l1", "l2"], modelId: "test-org/old", modelSource: "hub", port, portRange });
  const serving = await dw.waitServing("upgraded", oldRevision, 90_000);
  const coordinatorPid = serving.coordinator!.pid;
  // Which weights answer: the commit the Hub's branch resolved to.
  expect(serving.modelCommit).toBe("1".repeat(40));

  // Every transfer of the new weights is cut before its first byte, until the faults are cleared (the
  // plan's reads of their headers, a few KiB, go through).
  const weights = (await readdir(newModel)).filter((f) => f.endsWith(".safetensors"));
  for (const path of weights) hub.injectFault({ path, cutAfterBytes: 0, times: 10_000, minBytes: 64 << 10 });
  const newRevision = await dw.define("upgraded", { nodes: ["l1", "l2"], modelId: "test-org/new", modelSource: "hub", port, portRange });
  const failing = await waitForStatus(world, "upgraded", (s) => s.observedRevision === newRevision && s.lastError !== undefined, 90_000);
  // The old revision serves on: Ready is its, its coordinator the same process, and it answers.
  expect(conditionOf(failing, "Ready")).toMatchObject({ status: "True", observedRevision: oldRevision });
  expect(failing.coordinator?.pid).toBe(coordinatorPid);
  expect(conditionOf(failing, "Staged")).toMatchObject({ status: "False", observedRevision: newRevision });
  // Each node's card is this staging's: the new model's bytes, not the old one's carried over.
  const newModelBytes = (await Promise.all((await readdir(newModel)).map(async (f) => (await stat(join(newModel, f))).size))).reduce((a, b) => a + b, 0);
  const stageCards = failing.staging.filter((card) => card.node === "l1" || card.node === "l2");
  expect(stageCards.map((card) => [card.node, card.state, card.bytesTotal])).toEqual([
    ["l1", "failed", newModelBytes],
    ["l2", "failed", newModelBytes],
  ]);
  // What serves is said beside the definition's model: the status and `shardctl status` alike.
  expect(failing.model).toBe("test-org/new");
  expect(failing.serving).toEqual({ revision: oldRevision, model: "test-org/old" });
  expect(failing.modelCommit).toBe("1".repeat(40));
  const listed = await runShardctl(world, ["status"]);
  expect(listed.stdout).toMatch(/^upgraded +\[cluster\] +\S+.* test-org\/new \(serving test-org\/old\) /m);
  const detailed = await runShardctl(world, ["status", "upgraded"]);
  expect(detailed.stdout).toContain(`serving revision ${oldRevision.slice(0, 12)}, model test-org/old (the stages below are its)`);
  const answer = await fetch(`${serving.coordinator!.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model: "test-org/old", prompt: "hello", max_tokens: 2, temperature: 0 }),
  });
  expect(answer.status).toBe(200);
  // Retried while it fails, the old revision serving throughout.
  await sleep(1_500);
  expect(conditionOf((await waitForStatus(world, "upgraded", () => true))!, "Ready")).toMatchObject({ status: "True", observedRevision: oldRevision });

  hub.clearFaults();
  const upgraded = await dw.waitServing("upgraded", newRevision, 120_000);
  expect(upgraded.serving).toBeUndefined();
  expect(upgraded.modelCommit).toBe("3".repeat(40));
  // Every version of the file: Ready left the old revision only after the new one's files were all staged.
  const versions = world.audit.statusesOf("upgraded");
  const withdrawn = versions.findIndex((v) => v.observedRevision === newRevision && conditionOf(v, "Ready")?.status !== "True");
  const staged = versions.findIndex((v) => conditionOf(v, "Staged")?.status === "True" && conditionOf(v, "Staged")?.observedRevision === newRevision);
  expect(withdrawn).toBeGreaterThan(0);
  expect(staged).toBeGreaterThan(0);
  expect(staged).toBeLessThanOrEqual(withdrawn);
  // While it staged, the status said so, naming the revision that served.
  const ahead = versions.find((v) => conditionOf(v, "Reconciling")?.reason === "Staging" && conditionOf(v, "Ready")?.status === "True");
  expect(conditionOf(ahead!, "Reconciling")?.message).toBe(`staging this revision on every node while revision ${oldRevision.slice(0, 12)} serves`);
}, 300_000);
