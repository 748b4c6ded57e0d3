/**
 * Without a router (`[router] kind = "none"`, the default) a definition that asks to register
 * (`register = true`, also the default) has no backend to confirm: the status does not claim one
 * (Registered False, NotRegistered, saying why; no router-registered step), and resyncs neither
 * warn that the router lost it nor register it again. The daemon runs in this process on two local nodes.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { isReadyAt, waitForStatus } from "./daemon-fixture.js";
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
