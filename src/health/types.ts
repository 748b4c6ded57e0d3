/**
 * What health watches and what it reports. The watched shapes are structural so a launch ledger
 * entry fits them as is (health does not depend on launch); the cards match the status file's
 * `stageCardSchema` and `coordinatorStatusSchema` (src/reconciler/status/schema.ts).
 */
import type { HealthReason } from "../errors/index.js";
import type { EngineKind } from "../engines/index.js";
import type { NodeAccess } from "../nodes/index.js";

/** A process to watch: a ledger process. */
export interface WatchedProcess {
  role: "stage" | "coordinator";
  /** Stage index; absent for the coordinator. */
  index?: number;
  /** Registry node name ("local" for the control machine). */
  node: string;
  pid: number;
  /** Kernel start time as the node reports it; a pid with another start time is another process. */
  startTime: string;
  /** Its log on its node: where an engine says why the process exited. Absent: nothing is read. */
  logFile?: string;
  /** Where its wrapper writes its exit status as it ends (the file's time is when). Absent: nothing is read. */
  exitFile?: string;
}

export interface WatchedPort {
  node: string;
  host: string;
  port: number;
  purpose: "transport" | "control" | "http";
}

/** A running cluster as the ledger records it. Transport ports are listed in stage order. */
export interface WatchedCluster {
  cluster: string;
  processes: readonly WatchedProcess[];
  ports: readonly WatchedPort[];
  coordinatorUrl?: string;
  /** The engine kind the processes run: its readiness facts say what /health means. Default: the default kind. */
  engine?: EngineKind;
  /** The model id the processes serve: the watchdog's completion names it to an engine that asks for one. */
  model?: string;
  /**
   * Longest a one-token completion may take before the cluster is judged hung, s, one sent every
   * half of it; 0: no watchdog. Default: the engine's own (EngineReadiness.generationWatchdog).
   */
  generationWatchdogSeconds?: number;
  /**
   * Longest the coordinator's /health may stay silent (no answer within the probe's deadline)
   * before the cluster is judged dead, s. Default: `strikes + 1` silent probes in a row.
   */
  healthSilenceSeconds?: number;
}

/** Transport port state, probed from the coordinator's node. */
/** "not-probed": the engine's transport must never be probed (a ring would take the probe for its neighbour). */
export type TransportState = "listening" | "closed" | "unknown" | "not-probed";

/**
 * The coordinator's health endpoint, by the engine's readiness facts: the ready status → ok, the
 * loading status → loading, refused or any other status → down, no answer → unknown.
 */
export type CoordinatorHealth = "ok" | "loading" | "down" | "unknown";

export type AggregateHealth = "Healthy" | "Degraded" | "Unhealthy";

/** The seed's stage card (status `stages[]`). */
export interface StageCard {
  index: number;
  node: string;
  /** Half-open layer range. */
  layers: [number, number];
  /** `host:port` of the transport listener. */
  address?: string;
  pid?: number;
  /** The engine's own number for the stage when it is not the index (mlx-lm's ring rank: reversed). */
  rank?: number;
  alive: boolean;
  /**
   * What the liveness probe found: "unknown" when the process's node could not be asked (its SSH
   * lost), where `alive` is false without the process being known gone.
   */
  liveness?: "alive" | "gone" | "unknown";
  transport: TransportState;
  /** Since when `alive` and `transport` have had their current values (RFC 3339). */
  since?: string;
}

/** The status file's `coordinator`. */
export interface CoordinatorCard {
  node: string;
  url: string;
  pid?: number;
  health: CoordinatorHealth;
  /** What a /health that is not ready said, in the engine's words, when it said why (at most 200 characters). */
  said?: string;
}

export interface ClusterObservation {
  cluster: string;
  at: string;
  health: AggregateHealth;
  stages: StageCard[];
  coordinator?: CoordinatorCard;
  /** One line per thing that is not healthy, for the status message. Empty when Healthy. */
  problems: string[];
  /** Processes definitely gone (start time no longer matches): not a doubtful probe. */
  gone: string[];
}

export interface HealthDeps {
  /** Node access by ledger node name ("local" included). */
  nodeFor: (name: string) => NodeAccess;
  /** Layer range per stage index (from the plan); [0, 0] where unknown. */
  layers?: ReadonlyArray<readonly [number, number]>;
  /** Per-probe deadline, ms. Default 1000. */
  probeTimeoutMs?: number;
  /**
   * The deadline a transport probe left unanswered is asked again with before its silence makes the
   * last strike, ms. Default 5 × probeTimeoutMs; 0 asks nothing again.
   */
  slowPathTimeoutMs?: number;
}

/** Why a cluster must come down: the health catalogue of src/errors. */
export type DeathReason = HealthReason;

/** A node whose control channel (SSH) stopped or resumed answering. */
export interface ObservabilityEvent {
  cluster: string;
  node: string;
  /** The processes it runs: `stage-1`, `coordinator`. */
  labels: string[];
  detail: string;
  at: string;
}

/**
 * The daemon reaches none of a cluster's nodes (each misses its liveness probes) and the
 * coordinator's /health is silent: the daemon's own network, most likely. Silence is not held
 * against the cluster for `graceMs` from `since`. Reported as it begins, and with `ended` once a
 * node or the coordinator answers again.
 */
export interface CutOffEvent {
  cluster: string;
  nodes: string[];
  since: string;
  graceMs: number;
  ended?: true;
}

export interface DeathEvent {
  cluster: string;
  /** `stage-0`, `coordinator`. */
  label: string;
  node: string;
  reason: DeathReason;
  detail: string;
  at: string;
  /**
   * Nothing was heard from the member: its transport port was silent (no answer, not a refusal)
   * from the coordinator's node while that node answered, so the path to the member's node is cut;
   * or it exited while its node had missed a liveness round within the last 10 s (a path that comes
   * and goes). What the member itself says of peers it stopped hearing then says only that nothing
   * reached it. Absent for every other death.
   */
  unheard?: true;
  /**
   * The nodes that missed two liveness rounds in a row (as many as make a node unobservable) within
   * the last 10 s when the death was declared: paths that come and go (a lossy link). A member there
   * is no witness of its peers' silence: what reached it says only that its own path dropped their
   * words. One missed round alone is not enough (a loaded machine's probe can be late). Absent when
   * no node did.
   */
  flakyNodes?: string[];
  /**
   * Members seen exiting because of this death before it was judged: each exited as its link to the
   * member named here (or to the one listed before it) closed, as its engine said in its log. The
   * first exit seen is often such a consequence (a peer exits milliseconds after the member it lost);
   * the death names the member that went first. Absent when no exit was judged a consequence.
   */
  consequences?: DeathConsequence[];
  /**
   * The members seen gone (exited) by the time the death was declared, the dead one included when
   * it exited: `stage-1`, `stage-0`. A process seen gone never comes back (its pid and start time
   * no longer match), so a later probe that gets no answer must not draw it alive or in doubt.
   */
  gone?: string[];
}

/** A member that exited because of a death: `stage-0`, and how (`pid 4242 exited because its link to stage-1 broke (connection closed)`). */
export interface DeathConsequence {
  label: string;
  node: string;
  detail: string;
}
