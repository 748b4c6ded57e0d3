/** How many stages a cluster has, and how many are up, counted as `shardctl status` counts them. */
import { launchInPlaceOfCards } from "../../launch-timeline/index.js";
import type { StatusView } from "./status-types.js";

/**
 * The definition's stage count, whether or not the cluster is planned or running (a stopped or
 * never-launched cluster has nodes but no cards); a status without `nodes` (an older daemon's)
 * falls back to the plan, then to the stage cards.
 */
export function stageCountOf(status: Pick<StatusView, "nodes" | "plan" | "stages">): number {
  return status.nodes?.length ?? status.plan?.stages.length ?? status.stages.length;
}

/** Stage cards whose node did not answer their liveness probe: neither up nor down (the process may well run). */
export function stagesUnknownOf(status: Pick<StatusView, "stages">): number {
  return status.stages.filter((s) => s.liveness === "unknown").length;
}

/** The stages up: alive cards, or while a launch has none yet, the stages of it that listen. */
export function stagesUpOf(status: Pick<StatusView, "stages" | "timeline" | "conditions">): number {
  const launching = launchInPlaceOfCards(status);
  return launching !== undefined ? launching.listening : status.stages.filter((s) => s.alive).length;
}
