/**
 * The restart budget is given back to a launch that served long enough
 * (`[daemon] restart_budget_reset_seconds`): with a budget of one launch, a stage killed soon after
 * the launch stalls the cluster, while one killed after the launch served for the reset period is
 * relaunched, its death counted as the first of a new series.
 */
import { expect, test } from "vitest";
import { conditionOf, killStage, runShardctl, sleep, waitForStatus } from "./daemon-fixture.js";
import { isServingAt, useDaemonWorld } from "./use-daemon-world.js";

/** How long a launch must serve to earn the budget back in this test, s. */
const resetSeconds = 4;

const dw = useDaemonWorld({ sshNodes: 2, settings: { restartBudget: 1, restartBudgetResetSeconds: resetSeconds }, resyncMs: 2_000 });

test("a death soon after the launch spends the budget; a death after the launch served the reset period is relaunched", async () => {
  const { world } = dw;
  const revision = await dw.define("steady", { nodes: ["n1", "n2"] });

  // Killed at once: the only launch of the budget is spent.
  const first = await dw.waitServing("steady", revision);
  await killStage(first, 1);
  const stalled = await waitForStatus(world, "steady", (s) => s.health === "Stalled");
  expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "RestartBudgetExhausted" });
  expect(stalled.restarts!.count).toBe(1);

  // A fresh budget by hand; this launch serves past the reset period, then dies: relaunched.
  expect((await runShardctl(world, ["reconcile", "steady"])).code).toBe(0);
  const second = await waitForStatus(world, "steady", (s) => isServingAt(s, revision) && s.health === "Healthy");
  expect(second.restarts!.count).toBe(1);
  await sleep(resetSeconds * 1000 + 1_000);
  await killStage(second, 0);
  const third = await waitForStatus(world, "steady", (s) => isServingAt(s, revision) && s.stages[0]!.pid !== second.stages[0]!.pid);
  expect(third.health).not.toBe("Stalled");
  expect(third.restarts!.count).toBe(1);
  // The death is still on record as evidence.
  expect(third.restarts!.evidence.length).toBeGreaterThanOrEqual(2);
  expect(third.restarts!.evidence.at(-1)!.message).toMatch(/(stage-[01]|coordinator) on (n1|n2|local): /);
}, 120_000);
