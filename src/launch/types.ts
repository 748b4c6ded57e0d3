import type { NodeAccess } from "../nodes/index.js";
import type { Registrar } from "../router/index.js";
import type { EngineDriver, TransportBackend } from "../engines/index.js";
import type { Ledger } from "./ledger.js";
import type { PortHolder, PortRange } from "./ports.js";
import type { RunClaim } from "./run-claim.js";

/** One stage of a launch: where it runs and what it holds. */
export interface StageTarget {
  index: number;
  /** Registry node name. */
  nodeName: string;
  node: NodeAccess;
  /** The IP address the stage binds and its peers dial (engines are given IPs, not names). */
  bindHost: string;
  /** Half-open layer range. */
  layers: [number, number];
  /** The model snapshot directory on that node. */
  modelDir: string;
  /** Per-launch directory on that node: cluster TOML, token, log, exit status. */
  runDir: string;
  /** Threads the stage computes with, set when stages share its machine (see EngineFacts.sharedMachineCores). */
  threads?: number;
}

export interface CoordinatorTarget {
  /** Registry node name, or "local" for the control machine. */
  nodeName: string;
  node: NodeAccess;
  /** The HTTP listener's host (`[coordinator] host`). */
  bindHost: string;
  /**
   * Where the daemon and the router reach the HTTP listener, when not at `bindHost`: a wildcard
   * (0.0.0.0, ::) is bound, never dialled, so its node's own address.
   */
  urlHost?: string;
  /**
   * The control address's host (the coordinator's node in the cluster TOML): the coordinator binds
   * it and the stages dial it with results, so it is the node's own address, as for a stage.
   */
  controlHost: string;
  httpPort: number;
  modelDir: string;
  runDir: string;
}

/** Deadlines of each waiting phase, in ms. */
export interface LaunchDeadlines {
  /** Until every stage's transport port accepts connections. Default 60000. */
  stageListenMs: number;
  /** Until the coordinator's /health answers 200. Default 120000. */
  coordinatorHealthMs: number;
  /** For the one-token readiness probe. Default 60000. */
  readinessMs: number;
  /** SIGTERM → SIGKILL grace period at teardown. Default 5000. */
  stopGraceMs: number;
}

export const defaultDeadlines: LaunchDeadlines = {
  stageListenMs: 60_000,
  coordinatorHealthMs: 120_000,
  readinessMs: 60_000,
  stopGraceMs: 5_000,
};

export interface LaunchRequest {
  cluster: string;
  revision: string;
  /** Recorded in the ledger: see LedgerEntry.identity. */
  identity?: string;
  /** Recorded in the ledger: see LedgerEntry.definitionDigest. */
  definitionDigest?: string;
  /** Recorded in the ledger: see LedgerEntry.owner. */
  owner?: string;
  /** The daemon that launches, claiming the run folders (see run-claim.ts); undefined claims none. */
  claimant?: RunClaim;
  driver: EngineDriver;
  transport: TransportBackend;
  portRange: PortRange;
  stages: StageTarget[];
  coordinator: CoordinatorTarget;
  /** Write explicit layer ranges into the engine config (`memory` strategy). */
  explicitLayers: boolean;
  /** The model name clients and the router use. */
  modelName: string;
  /** Sequences the KV caches are planned for (`max_sequences`): what the engine may generate at once. */
  maxSequences: number;
  /** Tokens per sequence the KV caches are planned for (`context_length`): the most one request may hold. */
  contextLength?: number;
  /** Router backend to register; undefined to skip registration. */
  router?: { backend: string; weight?: number };
  deadlines: LaunchDeadlines;
  /** Recorded in the ledger: see LedgerEntry.generationWatchdogSeconds. */
  generationWatchdogSeconds?: number;
  /** Recorded in the ledger: see LedgerEntry.memoryBytes. */
  memoryBytes?: Record<string, number>;
  /** Recorded in the ledger: see LedgerEntry.modelCommit. */
  modelCommit?: string;
  /** Recorded in the ledger: see LedgerEntry.healthSilenceSeconds. */
  healthSilenceSeconds?: number;
}

/** One step of the launch timeline. */
export interface TimelineEvent {
  at: string;
  step: string;
  detail?: string;
}

export interface LaunchContext {
  ledger: Ledger;
  registrar: Registrar;
  /** Ports other clusters hold (from the ledger), so launches never collide. */
  heldPorts: () => Promise<PortHolder[]>;
  /**
   * The cluster that holds the coordinator's HTTP port (`host` on registry node `node`), if another
   * does: asked when the ports are chosen, one launch at a time, so two launching at once cannot
   * both take it. Undefined: not asked (the HTTP probe alone decides).
   */
  httpPortHolder?: (node: string, host: string, port: number) => Promise<string | undefined>;
  /**
   * Called once, and awaited, just before the first process starts: everything before (the ledger
   * entry, run folders, leftovers, ports, launch files) starts nothing, and a launch that ends
   * there has run no engine. The daemon counts the launch against the restart budget here.
   */
  beforeFirstStart?: () => Promise<void>;
  /** Called for every timeline event as it happens. */
  onEvent?: (event: TimelineEvent) => void;
  /** Told of each engine log emptied past its limit while the launch runs (see log-keeper.ts). */
  onLogTrimmed?: (node: string, file: string, bytes: number) => void;
  /**
   * Aborted when the caller no longer wants this launch (its definition asks for another revision,
   * or the daemon stops). The launch stops where it is — between two steps, or within a wait for a
   * process (an engine still loading, or hung) — tears down everything it started, as after a
   * failure, and throws the signal's reason.
   */
  signal?: AbortSignal;
}

export interface LaunchResult {
  coordinatorUrl: string;
  timeline: TimelineEvent[];
}
