/**
 * Without a router (`[router] kind = "none"`, the default) a definition that asks to register
 * (`register = true`, also the default) has no backend to confirm: the status does not claim one
 * (Registered False, NotRegistered, saying why; no router-registered step), and resyncs neither
 * warn that the router lost it nor register it again. A router added to the settings later has the
 * running cluster registered, without a relaunch. The daemon runs in this process on two local nodes.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { conditionOf, isReadyAt, waitForStatus, writeSettings } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// Resync every second.
const dw = useDaemonWorld({ settings: { enabled: true }, resyncMs: 1_000 });

test("a cluster that asks to register, without a router: not claimed registered, and resyncs say nothing of a lost backend", async () => {
  const { world } = dw;
  await dw.define("unrouted", { nodes: ["l1", "l2"], register: true });
  const ready = await waitForStatus(world, "unrouted", (s) => isReadyAt(s), 90_000);
  expect(ready.health).toBe("Healthy");
  expect(ready.conditions.find((c) => c.type === "Registered")).toMatchObject({ status: "False", reason: "NotRegistered" });
  // It says which of the two it is: no router, not a definition that turned registration off.
  expect(ready.conditions.find((c) => c.type === "Registered")?.message).toBe(
    'no router to register with: [router] kind = "none" in shardctl.toml (the default); set kind = "continuum" and its config there to register clusters',
  );
  expect(ready.timeline.map((e) => e.step)).not.toContain("router-registered");
  // Three resyncs.
  await new Promise((r) => setTimeout(r, 3_500));
  const log = await readFile(join(world.root, "daemon.log"), "utf8");
  expect(log).not.toContain("the router no longer has the backend");
  expect((await waitForStatus(world, "unrouted", () => true)).health).toBe("Healthy");
}, 180_000);

test("a router added to the settings while the cluster runs: registered at the daemon's restart, said so, without a relaunch", async () => {
  const { world } = dw;
  const before = await waitForStatus(world, "unrouted", (s) => isReadyAt(s), 90_000);
  await dw.stopDaemon();
  await writeSettings(world, { enabled: true, router: true });
  const daemon = await dw.startDaemon();
  const registered = await waitForStatus(world, "unrouted", (s) => conditionOf(s, "Registered")?.status === "True", 30_000);
  expect(conditionOf(registered, "Registered")).toMatchObject({ reason: "BackendRegistered", message: 'backend "unrouted"' });
  expect(registered.stages.map((c) => c.pid)).toEqual(before.stages.map((c) => c.pid));
  expect(await readFile(world.routerConfig, "utf8")).toContain(before.coordinator!.url);
  const models = (await (await fetch(`${daemon.routerUrl}/v1/models`)).json()) as { data: Array<{ id: string }> };
  expect(models.data.map((m) => m.id)).toContain(world.modelDir);
  // Recorded in the ledger: the teardown of a definition removed deregisters it.
  expect((await new Ledger(world.stateDir).read("unrouted"))?.routerBackend).toBe("unrouted");
}, 180_000);
