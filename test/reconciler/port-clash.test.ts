/**
 * Two definitions asking for the same coordinator port on the same node: the second stalls at
 * once with PortInUse naming the cluster that holds the port, its restart budget untouched,
 * instead of failing every launch until the budget is spent. The first keeps serving. The
 * daemon runs in this process on two local nodes.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  conditionOf,
  definitionText,
  enginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "./daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon;

beforeAll(async () => {
  world = await startWorld();
  await writeSettings(world, { enabled: true, restartBudget: 3 });
  daemon = await startInProcessDaemon(world);
});

afterAll(async () => {
  if (world !== undefined) {
    await removeDefinition(world, "second", 60_000);
    await removeDefinition(world, "first", 60_000);
  }
  await daemon?.stop();
  if (world !== undefined) {
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 120_000);

test("a coordinator port another cluster holds: Stalled PortInUse at once, naming it; the other keeps serving", async () => {
  const port = await freePort();
  const range = await freePortRange(["127.0.0.1"], 8);
  await writeDefinition(world, "first", definitionText(world, { nodes: ["l1", "l2"], port, portRange: range }));
  await waitForStatus(world, "first", (s) => isReadyAt(s), 90_000);
  await writeDefinition(world, "second", definitionText(world, { nodes: ["l1", "l2"], port, portRange: range, contextLength: 128 }));
  const stalled = await waitForStatus(world, "second", (s) => s.health === "Stalled", 60_000);
  expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "PortInUse" });
  expect(conditionOf(stalled, "Stalled")?.message).toContain(`[coordinator] port ${port} on local is held by cluster "first"`);
  expect(stalled.restarts?.evidence).toEqual([]);
  expect(isReadyAt((await waitForStatus(world, "first", () => true))!)).toBe(true);
}, 180_000);
