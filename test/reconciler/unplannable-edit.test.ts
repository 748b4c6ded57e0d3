// An edit that cannot be planned (here a model directory that does not exist) leaves the running
// launch serving, and its stage cards keep saying which layers each process holds: the plan of the
// new revision is missing, not the running one's. They said [0, 0) for every stage. A real daemon
// (in this process) runs a two-stage cluster on two local nodes with the reference engine.
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { conditionOf, readStatusFile, sleep, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("a running cluster's stage cards keep their layers while an edit cannot be planned", async () => {
  const { world } = dw;
  const { port, portRange } = await dw.freeAddresses();
  const first = await dw.define("keep", { nodes: ["l1", "l2"], port, portRange });
  const ready = await dw.waitServing("keep", first, 90_000);
  const cards = ready.stages.map((c) => ({ pid: c.pid, layers: c.layers }));
  expect(cards.map((c) => c.layers)).toEqual([
    [0, 2],
    [2, 4],
  ]);

  const missing = join(world.root, "models", "no-such-model");
  const second = await dw.define("keep", { nodes: ["l1", "l2"], port, portRange, modelId: missing });
  const failing = await waitForStatus(world, "keep", (s) => s.observedRevision === second && s.lastError?.reason === "ModelSourceUnreachable", 30_000);
  // The old revision still serves, and Ready says so at that revision while the edit is retried.
  expect(conditionOf(failing, "Ready")).toMatchObject({ status: "True", observedRevision: first });
  expect(conditionOf(failing, "Reconciling")).toMatchObject({ status: "True", reason: "RetryingAfterError" });
  // The first pass of the edit observes with the previous observation at hand; its retry, which
  // the status history does not repeat, observes again: wait for its line in the daemon's log (it
  // is written after the pass's status).
  await untilFailedPasses(2);
  const refused = (await readStatusFile(world, "keep"))!;

  // The same processes, holding the same layers.
  expect(refused.stages.map((c) => ({ pid: c.pid, layers: c.layers }))).toEqual(cards);
  expect(refused.stages.every((c) => c.alive)).toBe(true);
  expect(conditionOf(refused, "Ready")).toMatchObject({ status: "True", reason: "ClusterReady", observedRevision: first });
}, 180_000);

/** Until the daemon's log holds `count` passes of "keep" that failed to plan the missing model. */
async function untilFailedPasses(count: number, timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const lines = (await readFile(join(dw.world.root, "daemon.log"), "utf8")).split("\n").filter(Boolean);
    const failed = lines
      .map((l) => JSON.parse(l) as { cluster?: string; reason?: string; steps?: string })
      .filter((l) => l.cluster === "keep" && l.reason === "ModelSourceUnreachable" && l.steps !== undefined);
    if (failed.length >= count) return;
    if (Date.now() > deadline) throw new Error(`the daemon logged ${failed.length} failed passes of keep in ${timeoutMs} ms, not ${count}`);
    await sleep(100);
  }
}
