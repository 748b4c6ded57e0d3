/**
 * A launch that served for `[daemon] restart_budget_reset_seconds` (600 s by default) proved its
 * revision: when it dies, the launches before it no longer count against the restart budget. A
 * cluster that fails now and then over weeks (a power cut, a network blip) is relaunched each time,
 * and only one that keeps failing soon after each launch runs out of launches and is Stalled — as
 * Kubernetes forgets a crash loop's back-off once a container has run for ten minutes.
 *
 * Service counts from when this daemon first saw the launch serving: a daemon restarted beside a
 * running launch counts from its own first look, never more than the truth. It is judged once per
 * launch, at the first sign of its death: a pass that finds a process gone judges it before it
 * decides between a relaunch and a stall (the monitor may record the death only after that
 * decision, on a busy machine), and the record that follows judges nothing again.
 */
import type { Pass } from "./pass.js";

/** Give the budget back when the launch `startedAt`, dead at `diedAt` (epoch ms), served long enough. */
export function giveBudgetBackAfterService(pass: Pass, startedAt: string, diedAt: number): void {
  const { memory, settings, world } = pass;
  const resetMs = settings.daemon.restartBudgetResetSeconds * 1000;
  const restarts = memory.restarts;
  if (memory.serviceJudgedFor === startedAt) return;
  memory.serviceJudgedFor = startedAt;
  if (resetMs === 0 || restarts === undefined || restarts.count === 0) return;
  if (memory.servingSeen?.launch !== startedAt) return;
  const servedMs = diedAt - memory.servingSeen.since;
  if (servedMs < resetMs) return;
  world.log.info(
    { cluster: pass.name, servedSeconds: Math.round(servedMs / 1000), launchesForgotten: restarts.count, resetSeconds: settings.daemon.restartBudgetResetSeconds },
    "the launch that died had served long enough to earn the restart budget back",
  );
  restarts.count = 0;
}
