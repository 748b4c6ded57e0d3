/**
 * The shapes the page reads: the status schema (schemas/status.schema.json) as the endpoints serve
 * it, and the plan preview. Kept to what the page uses; src/dashboard/types.ts checks at compile
 * time that the daemon's ClusterStatus fits them, so the page cannot read a field the schema lacks.
 */
export type Health = "Healthy" | "Progressing" | "Degraded" | "Unhealthy" | "Stopped" | "Suspended" | "Disabled" | "Stalled";

export interface ConditionView {
  type: string;
  status: "True" | "False" | "Unknown";
  reason: string;
  message: string;
  lastTransitionTime: string;
  observedRevision: string;
}

export interface StagePlanView {
  index: number;
  node: string;
  layers: [number, number];
  weightBytes: number;
  kvBytes: number;
  totalBytes: number;
  budgetBytes: number | null;
  /** Where budgetBytes came from; absent in status files written before it was recorded. */
  budgetSource?: "declared" | "probed" | "probed-capped-by-declared" | "memory-limit" | null;
  fit: number | null;
}

export interface PlanView {
  strategy: "equal" | "memory";
  feasible: boolean;
  stages: StagePlanView[];
  warnings: Array<{ reason: string; message: string }>;
}

export interface StagingView {
  node: string;
  state: "present" | "needs-download" | "mismatched" | "staging" | "failed" | "unknown";
  bytesDone: number;
  bytesTotal: number;
  /** Why the node failed, while its state is "failed". */
  reason?: string;
  message?: string;
}

export interface StageCardView {
  index: number;
  node: string;
  layers: [number, number];
  address?: string;
  pid?: number;
  alive: boolean;
  liveness?: "alive" | "gone" | "unknown";
  transport: "listening" | "closed" | "unknown" | "not-probed";
  rank?: number;
  since?: string;
}

export interface StatusView {
  cluster: string;
  file: string;
  /** The definition file is gone while the status stays: a prune under way, held up or refused. */
  definitionRemoved?: true;
  observedRevision: string;
  /** The last commit that touched the definition file (absent outside a git repository). */
  gitCommit?: string;
  /** The commit the daemon's checkout is at: HEAD of the repository holding the definitions. */
  gitHead?: string;
  desired: "running" | "stopped";
  model?: string;
  /** The definition's stage nodes in stage order; absent in status files of older daemons. */
  nodes?: string[];
  health: Health;
  conditions: ConditionView[];
  plan?: PlanView;
  staging: StagingView[];
  stages: StageCardView[];
  coordinator?: { node: string; url: string; pid?: number; health: "ok" | "loading" | "down" | "unknown"; said?: string };
  router?: { backend: string; url: string; registered: boolean };
  timeline: Array<{ at: string; step: string; detail?: string }>;
  restarts?: { revision: string; count: number; budget: number; evidence: Array<{ at: string; reason: string; message: string; logTail: string[] }> };
  lastError?: { reason: string; message: string; at: string };
  history: Array<{ at: string; action: string; result: "success" | "waiting" | "failed" | "stalled"; reason?: string; durationMs: number }>;
}

/** `POST /api/plan`'s answer. */
export interface PlanPreviewView {
  cluster: string;
  feasible: boolean;
  plan?: PlanView;
  model?: { source: string; family: string; layers: number; dtype: string };
  errors: Array<{ reason: string; message: string }>;
  issues: string[];
}

/** The stream's first event. */
export interface HelloView {
  tokenRequired: boolean;
  startedAt: string;
  /** The daemon sends a `beat` event this often, ms. */
  heartbeatMs: number;
  clusters: string[];
  /**
   * Clusters this daemon has not composed a status of yet (its first pass of each comes after it
   * starts serving): their status is the file an earlier daemon wrote, or a file it cannot read
   * (not in `clusters`; the page keeps what it had). Absent from a daemon that predates it.
   */
  unchecked?: string[];
}

/** A `statusFile` event: the cluster's status file could not be written (failure), or is written again (null). */
export interface StatusFileView {
  cluster: string;
  failure: { reason: string; message: string; at: string } | null;
}
