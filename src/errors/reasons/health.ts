/**
 * Why a running cluster must come down (src/health). Not thrown: a death tears the cluster down,
 * and the reconciler relaunches it within the restart budget.
 */
export type HealthReason =
  /** A stage process is gone. */
  | "StageDied"
  /** The coordinator process is gone. */
  | "CoordinatorDied"
  /** A stage's transport port stopped accepting connections. */
  | "StagePortClosed"
  /** The coordinator's /health stopped answering 200. */
  | "CoordinatorUnhealthy"
  /** A one-token completion took longer than the engine's generation watchdog allows: the pipeline hangs. */
  | "GenerationHung"
  | "GenerationFailed"
  /**
   * A member's process stayed stopped (SIGSTOP, held by a tracer) for consecutive probes, in an
   * engine whose /health answers 200 through such a hang (judged only for those).
   */
  | "ProcessStopped"
  /**
   * Not a death: the daemon cannot reach a node over SSH while the pipeline's own checks pass. The
   * cluster keeps serving, Degraded, with this reason on the condition that node's checks feed.
   */
  | "NodeUnobservable"
  /**
   * Not a death: the daemon reaches none of the cluster's nodes over SSH and the coordinator's
   * /health is silent — the daemon's own network, most likely — while the pipeline may serve its
   * clients. Ready is Unknown; nothing is torn down for the grace (5 minutes) of it.
   */
  | "DaemonCutOff"
  /**
   * Not a death: a pass's probe of a stage's transport port or of the coordinator's /health got no
   * answer within its deadline; the condition it feeds is Unknown, the monitor's strikes judge it.
   * Also Ready's reason from the end of a cut-off (DaemonCutOff) until the next look.
   */
  | "ProbeUnanswered";
