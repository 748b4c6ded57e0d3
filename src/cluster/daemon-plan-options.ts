/**
 * How the daemon plans a cluster, asked by the daemon and by every command that wants its plan:
 * with distributed serving on it is about to stage and launch, so it probes the cluster's nodes (the
 * budgets are what each stage node reports, capped by its declared memory) and may pin a Hub branch to
 * its commit; off, it plans from the declared memory alone and touches no node.
 */
import type { Settings } from "../spec/index.js";
import type { ClusterNodes } from "./cluster-nodes.js";
import type { PlanForClusterOptions } from "./plan-for-cluster.js";

export interface DaemonPlanChoices {
  /** Pin a Hub branch to its commit: only when the plan's files are going to be staged. */
  pin: boolean;
}

/** The options of `planForCluster` the daemon plans with; `nodes` (the cluster's) is asked only when they are probed. */
export function daemonPlanOptions(settings: Pick<Settings, "distributed">, nodes: () => ClusterNodes, choices: DaemonPlanChoices): PlanForClusterOptions {
  return settings.distributed.enabled ? { probe: nodes(), pin: choices.pin } : {};
}
