/**
 * A router that cannot take a registration now — its YAML broken by a hand edit — is found before a
 * launch starts anything: the launch fails RouterUnavailable saying nothing was started, is
 * not counted against the restart budget (a launch run whole into it, three times, stalled a new
 * cluster within 17 s, and fixing the file did not bring it back), and launches once the file is
 * fixed. The daemon runs in this process on two local nodes, with the embedded router.
 */
import { readFile, writeFile } from "node:fs/promises";
import { expect, test } from "vitest";
import { conditionOf, isReadyAt, statusesDuring, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, router: true } });

test("a router config that does not parse: nothing started, nothing counted, launched once it is fixed", async () => {
  const { world } = dw;
  const good = await readFile(world.routerConfig, "utf8");
  await writeFile(world.routerConfig, `${good}\nbackends: [ {\n`);
  await dw.define("refused", { nodes: ["l1", "l2"], register: true });
  const refused = await waitForStatus(world, "refused", (s) => s.lastError?.reason === "RouterUnavailable", 60_000);
  expect(refused.lastError!.message).toMatch(/the router cannot take a registration now: .*nothing was started/);
  expect(refused.timeline.map((e) => e.step)).not.toContain("stage-0-started");
  // Retried with back-off a few times meanwhile, never counted: not even in the status a retry
  // writes as it begins (each version the daemon wrote meanwhile is read).
  const meanwhile = await statusesDuring(world, "refused", 3_000);
  expect(
    meanwhile.some((s) => conditionOf(s, "Reconciling")?.reason === "Launching"),
    "a retry was written as it began",
  ).toBe(true);
  expect(meanwhile.map((s) => s.restarts?.count ?? 0)).toEqual(meanwhile.map(() => 0));
  expect(meanwhile.map((s) => s.health)).not.toContain("Stalled");
  await writeFile(world.routerConfig, good);
  const ready = await waitForStatus(world, "refused", (s) => isReadyAt(s), 120_000);
  expect(ready.restarts?.count).toBe(1);
}, 200_000);
