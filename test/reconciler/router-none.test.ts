/**
 * Without a router (`[router] kind = "none"`, the default) a definition that asks to register
 * (`register = true`, also the default) has no backend to confirm: resyncs neither warn that the
 * router lost it nor register it again. The daemon runs in this process on two local nodes.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { isReadyAt, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// Resync every second.
const dw = useDaemonWorld({ settings: { enabled: true }, resyncMs: 1_000 });

test("resyncs of a registered cluster without a router say nothing of a lost backend", async () => {
  const { world } = dw;
  await dw.define("unrouted", { nodes: ["l1", "l2"], register: true });
  const ready = await waitForStatus(world, "unrouted", (s) => isReadyAt(s), 90_000);
  expect(ready.health).toBe("Healthy");
  // Three resyncs.
  await new Promise((r) => setTimeout(r, 3_500));
  const log = await readFile(join(world.root, "daemon.log"), "utf8");
  expect(log).not.toContain("the router no longer has the backend");
  expect((await waitForStatus(world, "unrouted", () => true)).health).toBe("Healthy");
}, 180_000);
