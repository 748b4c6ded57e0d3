/**
 * A resync confirms the router still has the backend the ledger says was registered: one removed
 * from the router's config behind the daemon's back (a router restarted without it, a hand edit)
 * is registered again, and the cluster stays Ready. The daemon runs in this process on two local
 * nodes, with the embedded router on its YAML config.
 */
import { readFile, writeFile } from "node:fs/promises";
import { expect, test } from "vitest";
import { conditionOf, isReadyAt, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// Resync every second.
const dw = useDaemonWorld({ settings: { enabled: true, router: true }, resyncMs: 1_000 });

test("a backend the router lost is registered again at the next resync", async () => {
  const { world } = dw;
  await dw.define("routed", { nodes: ["l1", "l2"], register: true });
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
