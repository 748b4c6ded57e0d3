/**
 * Health of running clusters: per stage, process liveness (exit watch, polling fallback) and
 * transport port state probed from the coordinator's node; the coordinator's `/health`; an
 * aggregate. `observeCluster` looks once (status cards); `monitorCluster` watches until a death.
 */
export type {
  AggregateHealth,
  ClusterObservation,
  CoordinatorCard,
  CoordinatorHealth,
  DeathConsequence,
  DeathEvent,
  DeathReason,
  HealthDeps,
  ObservabilityEvent,
  CutOffEvent,
  StageCard,
  TransportState,
  WatchedCluster,
  WatchedPort,
  WatchedProcess,
} from "./types.js";
export { observeCluster, type ObserveOptions } from "./observe-cluster.js";
export { monitorCluster, defaultCutOffGraceMs, type ClusterMonitor, type MonitorOptions } from "./monitor-cluster.js";
export { aggregateHealth } from "./aggregate-health.js";
export { blamedForLostLink, consequenceOf, describeDeath } from "./describe-death.js";
export {
  clipLine,
  healthInWords,
  probeCoordinatorHealth,
  notReadyAnswer,
  notReadyBodyChars,
  readStart,
  asksForModel,
  readCapped,
  type CoordinatorAnswer,
  probeLiveness,
  probeTransport,
  probeTransportPort,
  shouldProbeTransport,
  transportStateOf,
  type LivenessProbe,
  type TransportAnswer,
} from "./probes.js";
export { StrikeCounter } from "./strike-counter.js";
export { describeStopped, lookForStoppedMembers, type StoppedMember } from "./stopped-members.js";
