/**
 * A resync confirms the router still has the backend the ledger says was registered: one removed
 * from the router's config behind the daemon's back (a router restarted without it, a hand edit)
 * is registered again, and the cluster stays Ready. The daemon runs in this process on two local
 * nodes, with the embedded router on its YAML config.
 */
import { readFile, writeFile } from "node:fs/promises";
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
  await writeSettings(world, { enabled: true, router: true });
  // Resync every second.
  daemon = await startInProcessDaemon(world, 1_000);
});

afterAll(async () => {
  if (world !== undefined) await removeDefinition(world, "routed", 60_000);
  await daemon?.stop();
  if (world !== undefined) {
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 120_000);

test("a backend the router lost is registered again at the next resync", async () => {
  await writeDefinition(
    world,
    "routed",
    definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]), register: true }),
  );
  const ready = await waitForStatus(world, "routed", (s) => isReadyAt(s), 90_000);
  expect(conditionOf(ready, "Registered")).toMatchObject({ status: "True", reason: "BackendRegistered" });
  const registered = await readFile(world.routerConfig, "utf8");
  expect(registered).toContain(ready.coordinator!.url);
  // The router's backends emptied behind the daemon's back.
  await writeFile(world.routerConfig, registered.replace(/backends:[\s\S]*$/, "backends: []\n"));
  const deadline = Date.now() + 20_000;
  while (!(await readFile(world.routerConfig, "utf8")).includes(ready.coordinator!.url) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
  expect(await readFile(world.routerConfig, "utf8")).toContain(ready.coordinator!.url);
  expect(isReadyAt((await waitForStatus(world, "routed", () => true))!)).toBe(true);
}, 180_000);
