/**
 * Reconcile requests in quick succession (a double click on "Reconcile now", two `shardctl
 * reconcile`s): each is taken. A request file dropped right after the daemon removed the one
 * before it comes to the daemon's directory watcher as a rewrite of that file, not a new one.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { dropReconcileRequest, requestTaken } from "../../src/reconciler/reconcile-request.js";
import { loadSettings } from "../../src/spec/index.js";
import { definitionText, startInProcessDaemon, startWorld, waitForStatus, writeDefinition, type DaemonWorld } from "./daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon;

beforeAll(async () => {
  world = await startWorld();
  await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1"] }));
  daemon = await startInProcessDaemon(world);
  await waitForStatus(world, "alpha", (s) => s.plan !== undefined);
  await daemon.whenIdle();
});

afterAll(async () => {
  await daemon?.stop();
  await world?.close();
});

it("takes each of five requests dropped one right after the other was taken", async () => {
  const settings = await loadSettings(world.settingsFile);
  for (let i = 0; i < 5; i++) {
    const request = await dropReconcileRequest(settings, "alpha");
    expect(await requestTaken(request, 5_000), `request ${i + 1} was not taken within 5 s`).toBe(true);
  }
});
