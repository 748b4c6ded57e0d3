import type { AggregateHealth, CoordinatorCard, StageCard } from "./types.js";

/**
 * One word for the whole cluster. Unhealthy: something is definitely wrong (a process gone, a
 * transport port closed, the coordinator down, or nothing recorded at all); a pipeline cannot
 * survive any of these. Degraded: something could not be told (a node did not answer) or the
 * coordinator reports it is still loading. Healthy otherwise.
 * `unknownLiveness` lists stages whose liveness could not be probed (their card says alive false).
 */
export function aggregateHealth(
  stages: readonly StageCard[],
  coordinator: CoordinatorCard | undefined,
  unknownLiveness: ReadonlySet<number>,
  coordinatorLiveness: "alive" | "gone" | "unknown" | undefined,
): AggregateHealth {
  if (stages.length === 0 || coordinator === undefined || coordinatorLiveness === undefined) return "Unhealthy";
  const stageGone = stages.some((s) => !s.alive && !unknownLiveness.has(s.index));
  if (stageGone || coordinatorLiveness === "gone") return "Unhealthy";
  if (stages.some((s) => s.transport === "closed") || coordinator.health === "down") return "Unhealthy";
  const doubtful = unknownLiveness.size > 0 || coordinatorLiveness === "unknown" || stages.some((s) => s.transport === "unknown") || coordinator.health !== "ok";
  return doubtful ? "Degraded" : "Healthy";
}
