/** How many stages a cluster has, counted as `shardctl status` counts them. */
import type { StatusView } from "./status-types.js";

/**
 * The definition's stage count, whether or not the cluster is planned or running (a stopped or
 * never-launched cluster has nodes but no cards); a status without `nodes` (an older daemon's)
 * falls back to the plan, then to the stage cards.
 */
export function stageCountOf(status: Pick<StatusView, "nodes" | "plan" | "stages">): number {
  return status.nodes?.length ?? status.plan?.stages.length ?? status.stages.length;
}
