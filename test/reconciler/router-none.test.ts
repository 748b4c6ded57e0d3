/**
 * Without a router (`[router] kind = "none"`, the default) a definition that asks to register
 * (`register = true`, also the default) has no backend to confirm: resyncs neither warn that the
 * router lost it nor register it again. The daemon runs in this process on two local nodes.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import {
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
  await writeSettings(world, { enabled: true });
  // Resync every second.
  daemon = await startInProcessDaemon(world, 1_000);
});

afterAll(async () => {
  if (world !== undefined) await removeDefinition(world, "unrouted", 60_000);
  await daemon?.stop();
  if (world !== undefined) {
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 120_000);

test("resyncs of a registered cluster without a router say nothing of a lost backend", async () => {
  await writeDefinition(
    world,
    "unrouted",
    definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]), register: true }),
  );
  const ready = await waitForStatus(world, "unrouted", (s) => isReadyAt(s), 90_000);
  expect(ready.health).toBe("Healthy");
  // Three resyncs.
  await new Promise((r) => setTimeout(r, 3_500));
  const log = await readFile(join(world.root, "daemon.log"), "utf8");
  expect(log).not.toContain("the router no longer has the backend");
  expect((await waitForStatus(world, "unrouted", () => true)).health).toBe("Healthy");
}, 180_000);
