/**
 * The restart budget is given back to a launch that served long enough
 * (`[daemon] restart_budget_reset_seconds`): with a budget of one launch, a stage killed soon after
 * the launch stalls the cluster, while one killed after the launch served for the reset period is
 * relaunched, its death counted as the first of a new series.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "vitest";
import type { ClusterStatus, Daemon } from "../../src/reconciler/index.js";
import {
  conditionOf,
  definitionText,
  enginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  killStage,
  removeDefinition,
  revisionOf,
  runShardctl,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "./daemon-fixture.js";

/** How long a launch must serve to earn the budget back in this test, s. */
const resetSeconds = 4;

let world: DaemonWorld;
let daemon: Daemon;

beforeAll(async () => {
  world = await startWorld({ sshNodes: 2 });
  await writeSettings(world, { restartBudget: 1, restartBudgetResetSeconds: resetSeconds });
  daemon = await startInProcessDaemon(world, 2_000);
});

afterAll(async () => {
  if (world !== undefined) await removeDefinition(world, "steady");
  await daemon?.stop();
  const left = world === undefined ? [] : await enginesOf(world);
  await world?.close();
  expect(left).toEqual([]);
});

afterEach(() => {
  expect(world.audit.problems).toEqual([]);
});

const serving = (revision: string) => (s: ClusterStatus) => isReadyAt(s, revision) && s.stages.length === 2 && s.stages.every((c) => c.alive);

test("a death soon after the launch spends the budget; a death after the launch served the reset period is relaunched", async () => {
  const hosts = ["127.0.0.1", ...world.hosts.values()];
  await writeDefinition(world, "steady", definitionText(world, { nodes: ["n1", "n2"], port: await freePort(), portRange: await freePortRange(hosts) }));
  const revision = await revisionOf(world, "steady");

  // Killed at once: the only launch of the budget is spent.
  const first = await waitForStatus(world, "steady", serving(revision));
  await killStage(first, 1);
  const stalled = await waitForStatus(world, "steady", (s) => s.health === "Stalled");
  expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "RestartBudgetExhausted" });
  expect(stalled.restarts!.count).toBe(1);

  // A fresh budget by hand; this launch serves past the reset period, then dies: relaunched.
  expect((await runShardctl(world, ["reconcile", "steady"])).code).toBe(0);
  const second = await waitForStatus(world, "steady", (s) => serving(revision)(s) && s.health === "Healthy");
  expect(second.restarts!.count).toBe(1);
  await sleep(resetSeconds * 1000 + 1_000);
  await killStage(second, 0);
  const third = await waitForStatus(world, "steady", (s) => serving(revision)(s) && s.stages[0]!.pid !== second.stages[0]!.pid);
  expect(third.health).not.toBe("Stalled");
  expect(third.restarts!.count).toBe(1);
  // The death is still on record as evidence.
  expect(third.restarts!.evidence.length).toBeGreaterThanOrEqual(2);
  expect(third.restarts!.evidence.at(-1)!.message).toMatch(/(stage-[01]|coordinator) on (n1|n2|local): /);
}, 120_000);
