/**
 * A death that a reconcile pass finds before the health monitor does (the two race when a pass is
 * under way at the kill) is recorded all the same: the evidence names the process that was killed,
 * how it ended and its log tail (then the peers that exited because of it), and the stall on a
 * spent budget says why; a launch that served the restart budget's reset period before the death
 * a pass found earned the budget back and is relaunched, as when the monitor finds it. The monitor
 * here neither watches exits nor polls within the test, so only the daemon's resync pass can find
 * the death.
 */
import { expect, test } from "vitest";
import { conditionOf, enginePidOf, enginesOf, killStage, revisionOf, runShardctl, sleep, waitForStatus } from "./daemon-fixture.js";
import { isServingAt, useDaemonWorld } from "./use-daemon-world.js";

/**
 * How long a launch must serve to earn the restart budget back, s: far longer than the first test's
 * launch serves before its kill is found (a resync or two on a loaded machine).
 */
const resetSeconds = 8;

// Resync every second; the monitor would first poll in ten minutes and watches no exits.
const dw = useDaemonWorld({
  sshNodes: 2,
  settings: { restartBudget: 1, restartBudgetResetSeconds: resetSeconds },
  resyncMs: 1_000,
  monitor: { pollIntervalMs: 600_000, exitWatch: false },
});

test("a stage killed while only passes look: evidence names it, with its signal and log tail; the stall says why", async () => {
  const { world } = dw;
  const revision = await dw.define("found", { nodes: ["n1", "n2"] });
  const ready = await dw.waitServing("found", revision);
  expect(ready.restarts).toMatchObject({ count: 1, budget: 1, evidence: [] });

  process.kill(await enginePidOf(ready.stages[1]!.pid!), "SIGKILL");
  // Stalled from the death on (the budget is spent); how the killed one ended is known once the
  // teardown has ended, and the stall's pass then writes it.
  const stalled = await waitForStatus(world, "found", (s) => s.health === "Stalled" && /\(killed by /.test(s.restarts?.evidence[0]?.message ?? ""));
  expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "RestartBudgetExhausted" });
  expect(stalled.restarts!.evidence).toHaveLength(1);
  const evidence = stalled.restarts!.evidence[0]!;
  expect(evidence.reason).toBe("StageDied");
  // Its peers may be gone too by the time the pass looks: the killed one is blamed, and each peer
  // whose log says it lost its link to it, or to a peer gone because of it (the coordinator may
  // hear stage-0 go first), is named after it.
  expect(evidence.message).toMatch(
    /^stage-1 on n2: pid \d+ is no longer running \(killed by SIGKILL \(status 137\)\)(; (stage-0 on n1|coordinator on local): pid \d+ is no longer running because its link to stage-[01] broke \([^)]+\))*$/,
  );
  expect(evidence.logTail.length).toBeGreaterThan(0);
  expect(conditionOf(stalled, "Stalled")?.message).toContain(`the last failure: StageDied: stage-1 on n2`);
  expect(await enginesOf(world)).toEqual([]);
});

test("a launch that served the reset period, killed while only passes look: relaunched, not stalled", async () => {
  const { world } = dw;
  // The first test left the cluster stalled: a fresh budget by hand.
  expect((await runShardctl(world, ["reconcile", "found"])).code).toBe(0);
  const revision = await revisionOf(world, "found");
  const serving = await waitForStatus(world, "found", (s) => isServingAt(s, revision) && s.health === "Healthy");
  expect(serving.restarts!.count).toBe(1);
  await sleep(resetSeconds * 1000 + 1_000);
  await killStage(serving, 1);
  // The pass that finds the death decides on a relaunch: the launch's service gave the budget back.
  const relaunched = await waitForStatus(world, "found", (s) => isServingAt(s, revision) && s.stages[1]!.pid !== serving.stages[1]!.pid);
  expect(relaunched.health).not.toBe("Stalled");
  expect(relaunched.restarts!.count).toBe(1);
  expect(relaunched.restarts!.evidence.at(-1)!.message).toMatch(/^stage-1 on n2: pid \d+ is no longer running/);
}, 120_000);
