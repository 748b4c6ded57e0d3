/**
 * How the daemon plans a cluster, asked by the daemon and by every command that wants its plan:
 * with distributed serving on it is about to stage and launch, so it probes the stage nodes (the
 * budgets are what each node reports, capped by its declared memory) and may pin a Hub branch to
 * its commit; off, it plans from the declared memory alone and touches no node.
 */
import type { NodeAccess } from "../nodes/index.js";
import type { Settings } from "../spec/index.js";
import type { PlanForClusterOptions } from "./plan-for-cluster.js";

export interface DaemonPlanChoices {
  /** Pin a Hub branch to its commit: only when the plan's files are going to be staged. */
  pin: boolean;
}

/** The options of `planForCluster` the daemon plans with; `stages` (the stage nodes, in stage order) is asked only when they are probed. */
export function daemonPlanOptions(settings: Pick<Settings, "distributed">, stages: () => readonly NodeAccess[], choices: DaemonPlanChoices): PlanForClusterOptions {
  return settings.distributed.enabled ? { probe: stages(), pin: choices.pin } : {};
}
