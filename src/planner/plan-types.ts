import type { EngineKind } from "../engines/index.js";
import type { PlannerReason } from "../errors/index.js";
import type { BudgetSource } from "./node-budget.js";

/** Options of one plan; defaults are filled in by planShards. */
export interface PlanOptions {
  /** "equal" reproduces the engine's own split; "memory" weights by budget (engines that accept explicit layers). */
  strategy: "equal" | "memory";
  /** Budget divisor (≥ 1). Default: the engine's memoryHeadroom. */
  headroom?: number;
  /** Tokens per sequence the KV cache is sized for. */
  contextLength: number;
  /** Concurrent sequences. Default 1. */
  maxSequences?: number;
  /** The engine kind whose facts (split, families, advice) the plan follows. */
  engine: EngineKind;
  /** Plan a model family outside the validated Llama family (warning instead of error). Default false. */
  allowUnvalidatedFamily?: boolean;
}

/** A warning or error of the plan; `reason` is stable (CamelCase), `message` is for people. */
export interface PlanMessage {
  reason: PlannerReason;
  message: string;
}

/** One pipeline stage. Bytes throughout; `layers` is half-open [start, end). */
export interface StagePlan {
  index: number;
  node: string;
  layers: [start: number, end: number];
  layerCount: number;
  /** The engine's own number for this stage when it is not the index (mlx-lm's ring rank: reversed). */
  rank?: number;
  first: boolean;
  last: boolean;
  /** Layer weights plus embedding (first; last when tied), final norm and lm_head (last). */
  weightBytes: number;
  kvBytes: number;
  totalBytes: number;
  /** The node's budget after headroom; null when no memory figure is known. */
  budgetBytes: number | null;
  /** The figure the budget came from (see `budgetOf`); null when no memory figure is known. */
  budgetSource: BudgetSource | null;
  /** totalBytes / budgetBytes (> 1 does not fit); null without a budget. */
  fit: number | null;
}

export interface PlanTotals {
  layers: number;
  stages: number;
  weightBytes: number;
  kvBytes: number;
  totalBytes: number;
  /** Sum of stage budgets; null when any is unknown. */
  budgetBytes: number | null;
  /** Largest stage fit; null when any budget is unknown. */
  maxFit: number | null;
}

export interface ShardPlan {
  /** True when there is no error. */
  feasible: boolean;
  strategy: PlanOptions["strategy"];
  /** The split the stages actually follow (the engine's own when the memory split cannot be used). */
  splitUsed: PlanOptions["strategy"];
  engine: PlanOptions["engine"];
  model: { source: string; family: string; layers: number; dtype: string; quantizationBits: number | null };
  options: Required<PlanOptions>;
  stages: StagePlan[];
  warnings: PlanMessage[];
  errors: PlanMessage[];
  totals: PlanTotals;
}
