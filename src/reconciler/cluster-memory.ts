/**
 * What the daemon remembers about one cluster between passes. Memory is never the truth — each
 * pass re-reads the definition and re-observes the world — but it carries what cannot be
 * observed: the last good definition, the restart budget and its evidence, the launch timeline,
 * staging progress, the pass history, and the plan of a revision (so an idle daemon does not
 * re-inspect the model every resync).
 */
import type { ClusterObservation, CutOffEvent, ObservabilityEvent } from "../health/index.js";
import type { LedgerEntry, Supervision } from "../launch/index.js";
import type { ClusterSpec } from "../spec/index.js";
import type { IdentifiedPlan } from "./decision-inputs.js";
import type { CheckoutHead } from "./git-commit.js";
import type { ClusterStatus, Condition } from "./status/index.js";

export interface RestartRecord {
  revision: string;
  /** Launches at this revision so far. */
  count: number;
  evidence: NonNullable<ClusterStatus["restarts"]>["evidence"];
}

export interface ClusterMemory {
  name: string;
  /**
   * The last definition that parsed, with its revision and text: what the daemon keeps through an
   * invalid edit (the text is parsed again then, with the settings of the moment).
   */
  lastGood?: { spec: ClusterSpec; revision: string; text?: string };
  /** The last pass found the definition file gone: the status says so until the prune is done. */
  definitionRemoved?: true;
  /** When a pass first found the definition file gone (performance.now(), ms: a wall clock stepped meanwhile does not move the grace); cleared once it is back. */
  removedSince?: number;
  /**
   * Members of the launch that started at `launch` seen gone (a death's, a look's): never asked
   * again, so a slow node does not draw them back in doubt while the launch is torn down.
   */
  seenGone?: { launch: string; labels: string[] };
  /** Plan of a revision and the launch identity it implies; recomputed only when the revision changes. */
  planned?: IdentifiedPlan;
  restarts?: RestartRecord;
  /**
   * The supervision (health monitor + teardown on death) of the running launch, if any, with the
   * launch's ledger entry as last read: written back should the ledger lose it while it runs.
   */
  supervision?: {
    startedAt: string;
    entry: LedgerEntry;
    supervision: Supervision;
    unobservable?: ReadonlyMap<string, ObservabilityEvent>;
    /** While the daemon reaches none of the cluster's nodes and its coordinator is silent. */
    cutOff?: CutOffEvent;
  };
  /** A launch (its `startedAt`) cut short by a previous daemon's end and given back to the budget. */
  refundedLaunch?: string;
  /** The next look at a running cluster that did not look Healthy, ms after its pass (see recheckUnlessHealthy). */
  recheckMs?: number;
  /**
   * The launch this daemon has seen serving (a launch, or a pass whose probes all answered): its
   * `startedAt`, and `since`, when this daemon first saw it so (epoch ms) — what the restart
   * budget's reset counts from.
   */
  servingSeen?: { launch: string; since: number };
  /**
   * The launch (its `startedAt`) whose service was judged against the restart budget's reset: once,
   * at the first sign of its death, whether a pass or the monitor found it.
   */
  serviceJudgedFor?: string;
  /**
   * The model the router was told is coming back (503 and Retry-After, not 404) after this cluster
   * lost a process: kept marked while relaunches run and between them, until one serves or the
   * cluster stalls.
   */
  comingBack?: string;
  /** The model the router was told is stalled (503 `model_stalled`, not 404), and since when (epoch ms): kept while the cluster stays Stalled. */
  stalledMark?: { model: string; since: number };
  /** The launch (its `startedAt`) whose death is already recorded: the monitor and a pass may both find it. */
  deathRecordedFor?: string;
  /**
   * The model commit the last staging of a revision put on the nodes (a Hub commit, or for a pushed
   * folder the digest of its files): a later staging of the same revision that stages another one
   * found the folder changed, not files lost on the nodes.
   */
  stagedCommit?: { revision: string; commit: string };
  /** The last commit that touched the definition, looked up once per revision. */
  gitCommit?: { revision: string; commit: string | undefined };
  /** The commit the checkout holding the definitions is at: looked up per revision and when HEAD moves. */
  gitHead?: CheckoutHead;
  observation?: ClusterObservation;
  conditions: Condition[];
  timeline: ClusterStatus["timeline"];
  staging: ClusterStatus["staging"];
  /** The revision whose staging the cards describe (undefined: cards recalled from a status file). */
  stagingRevision?: string;
  history: ClusterStatus["history"];
  lastError?: ClusterStatus["lastError"];
  /**
   * The error the last pass logged (failed or stalled): a pass that repeats the last one but says
   * something else (another invalid edit) gets its own line in the log, not a debug one.
   */
  lastLoggedError?: string;
  /** mtime:size of the definition when the last pass read it. */
  fileStamp?: string;
  /** The last pass converged (or stalled) with nothing running to watch: a resync can skip it. */
  settled?: boolean;
  /** Set by `shardctl reconcile <name>`: forget the restart budget and stall once. */
  retryRequested?: boolean;
  /** The previous status written, to keep fields a pass did not recompute. */
  status?: ClusterStatus;
  /**
   * The stage cards the previous daemon wrote, until this daemon first observes the cluster: a card
   * of the process still running keeps its `since` through a daemon restart (observe.ts decides).
   */
  inheritedCards?: ClusterStatus["stages"];
}

/** Remember members of the launch that started at `launch` as seen gone (see ClusterMemory.seenGone). */
export function noteGone(memory: ClusterMemory, launch: string, labels: readonly string[]): void {
  if (labels.length === 0) return;
  memory.seenGone = { launch, labels: [...new Set([...seenGoneOf(memory, launch), ...labels])] };
}

/** The members of the launch that started at `launch` seen gone so far. */
export function seenGoneOf(memory: ClusterMemory, launch: string): readonly string[] {
  return memory.seenGone?.launch === launch ? memory.seenGone.labels : [];
}

export function createMemory(name: string, previous?: ClusterStatus): ClusterMemory {
  return {
    name,
    conditions: previous?.conditions ?? [],
    timeline: previous?.timeline ?? [],
    staging: previous?.staging ?? [],
    history: previous?.history ?? [],
    ...(previous?.lastError === undefined ? {} : { lastError: previous.lastError }),
    // The budget survives a daemon restart through the status file.
    ...(previous?.restarts === undefined
      ? {}
      : { restarts: { revision: previous.restarts.revision, count: previous.restarts.count, evidence: previous.restarts.evidence } }),
    ...(previous === undefined || previous.stages.length === 0 ? {} : { inheritedCards: previous.stages }),
    ...(previous === undefined ? {} : { status: previous }),
  };
}
