/**
 * A node's declared memory is shared by every cluster on it. Each plan is budgeted alone, so two
 * clusters written at once (one checkout) each fit nodes that cannot hold both; the second launch
 * is refused (NodeMemoryTaken naming the node, its figure and the cluster that holds it), not
 * counted, and launched as soon as the first is removed. The daemon runs in this process on two
 * local nodes declared with 400 KiB each: a 2-stage cluster of the test model puts about 250 KiB
 * (weights and KV) on each, and the reference engine's headroom is 1.2.
 */
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { conditionOf, isReadyAt, readStatusFile, removeDefinition, sleep, statusesDuring, waitForStatus, writeWrappedEngine } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, nodeMemory: "400KiB" } });

test("two clusters written at once onto nodes that hold one: the second waits (NodeMemoryTaken, not counted) and launches once the first is removed", async () => {
  const { world } = dw;
  const names = ["mem-a", "mem-b"];
  const revisions = await Promise.all(names.map((name) => dw.define(name, { nodes: ["l1", "l2"] })));
  const first = await Promise.race(names.map((name, i) => waitForStatus(world, name, (s) => isReadyAt(s, revisions[i]), 90_000).then(() => name)));
  const second = names.find((n) => n !== first)!;
  // Each plan alone fits: the refusal is the launch's, not the plan's.
  const refused = await waitForStatus(world, second, (s) => s.lastError?.reason === "NodeMemoryTaken", 60_000);
  expect(conditionOf(refused, "Planned")?.status).toBe("True");
  expect(refused.lastError?.message).toMatch(
    new RegExp(
      `^node l[12] has 333\\.3 KiB for models \\(its declared 400\\.0 KiB ÷ headroom 1\\.2\\), of which cluster ${first} [\\d.]+ KiB hold [\\d.]+ KiB: this cluster's stages there need [\\d.]+ KiB more`,
    ),
  );
  expect(refused.restarts?.count ?? 0).toBe(0);
  expect(refused.health).toBe("Progressing");
  // Nor counted in the status a retry writes as it begins (each version written meanwhile is read).
  const meanwhile = await statusesDuring(world, second, 3_000);
  expect(meanwhile.map((s) => s.restarts?.count ?? 0)).toEqual(meanwhile.map(() => 0));
  expect(refused.stages).toEqual([]);
  expect(isReadyAt((await readStatusFile(world, first))!)).toBe(true);
  // The first goes: the second launches at once, not at the end of its back-off.
  expect(await removeDefinition(world, first)).toBe(true);
  const goneAt = Date.now();
  const ready = await waitForStatus(world, second, (s) => isReadyAt(s), 60_000);
  expect(Date.parse(ready.history.findLast((h) => h.result === "success")!.at) - goneAt).toBeLessThan(3_000);
  await sleep(100);
  expect(await removeDefinition(world, second)).toBe(true);
}, 240_000);

test("a restarted daemon counts what runs before it adopts it: a cluster written meanwhile waits for the nodes a running cluster holds", async () => {
  const { world } = dw;
  // The running cluster's engine answers --version slowly once the flag exists: the restarted
  // daemon's pass of it (planning first) adopts it only after 8 s.
  const flag = join(world.root, "slow-version");
  const binary = await writeWrappedEngine(world, "slow-version-engine.sh", `if [ "$1" = "--version" ] && [ -e ${JSON.stringify(flag)} ]; then sleep 8; fi`);
  const running = await dw.define("mem-run", { nodes: ["l1", "l2"], binary });
  await dw.waitServing("mem-run", running, 90_000);
  await dw.stopDaemon();
  try {
    await writeFile(flag, "");
    await dw.define("mem-new", { nodes: ["l1", "l2"] });
    await dw.startDaemon();
    // Refused for the memory the running cluster holds, though its pass has not adopted it yet.
    const refused = await waitForStatus(world, "mem-new", (s) => s.lastError !== undefined || isReadyAt(s), 60_000);
    expect(refused.lastError?.reason).toBe("NodeMemoryTaken");
    expect(refused.lastError?.message).toMatch(/of which cluster mem-run [\d.]+ KiB hold/);
    expect(refused.stages).toEqual([]);
  } finally {
    await rm(flag, { force: true });
  }
  await waitForStatus(world, "mem-run", (s) => isReadyAt(s, running), 60_000);
  expect(await removeDefinition(world, "mem-run")).toBe(true);
  await waitForStatus(world, "mem-new", (s) => isReadyAt(s), 60_000);
  expect(await removeDefinition(world, "mem-new")).toBe(true);
}, 240_000);
