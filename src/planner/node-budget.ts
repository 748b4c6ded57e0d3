import { defaultEngineKind, engineOf } from "../engines/index.js";

/** A node the plan may place a stage on. Memory figures are bytes. */
export interface PlanNode {
  name: string;
  /** Declared total memory: the registry's `memory`. */
  memoryBytes?: number;
  /** What the node reported when probed: its free memory (its total when it reports no free figure). */
  availableBytes?: number;
  /** A further cap on the plan's budget for the node (the registry's memory_limit; the engine is not told). */
  memoryLimitBytes?: number;
  /** Accelerator family, e.g. "apple-m2-ultra" or "metal"; clusters must be homogeneous. */
  accelerator?: string;
  /** Engine version the node runs; clusters must be homogeneous. */
  engineVersion?: string;
  /** The machine the node is (its registry `host`: "local", an address or an ssh alias); nodes on one machine share its cores. */
  machine?: string;
  /** Why a probe of the node gave no memory figure (it timed out, failed), when one was made and did: its budget then falls back to what is declared. */
  memoryNotProbed?: string;
}

/**
 * Where a stage's budget came from — the figure that decided it, before headroom:
 * - `declared`: the registry's `memory` (nothing was probed);
 * - `probed`: the free memory the node reported (no smaller figure declared);
 * - `probed-capped-by-declared`: the node reported more free memory than its declared `memory`,
 *   which caps it (the operator's word on how much of the machine the model may have);
 * - `memory-limit`: the registry's `memory_limit`, smaller than every other figure.
 */
export const budgetSources = ["declared", "probed", "probed-capped-by-declared", "memory-limit"] as const;
export type BudgetSource = (typeof budgetSources)[number];

/** How each source reads in a plan's output. */
export const budgetSourceLabels: Readonly<Record<BudgetSource, string>> = {
  declared: "declared",
  probed: "probed",
  "probed-capped-by-declared": "probed, capped by declared",
  "memory-limit": "memory_limit",
};

/** The one budget rule, in words, for every output that shows a plan. */
export const budgetRule =
  "a node's budget is the free memory it reports when probed, capped by its declared memory (and memory_limit), divided by the headroom; unprobed, its declared memory";

/** The budget divisor when a caller names none: the default engine's memoryHeadroom. */
export const defaultHeadroom = engineOf(defaultEngineKind).memoryHeadroom;

/**
 * A node's budget (bytes) and where it came from: the smallest of what it reported (free memory),
 * its declared memory and its memory limit — each figure that is known — divided by `headroom`
 * (default `defaultHeadroom`). Declared memory caps what is probed: a node reporting 19 GiB free
 * but declared with 2 GiB gets 2 GiB, since the operator said so and the free figure is a moment's
 * reading; a node reporting less than it declares gets what it reports, since memory that is not
 * free cannot hold a stage. Undefined when no figure is known.
 */
export function budgetOf(node: PlanNode, headroom = defaultHeadroom): { bytes: number; source: BudgetSource } | undefined {
  const { availableBytes: probed, memoryBytes: declared, memoryLimitBytes: limit } = node;
  // Ties go to the figure that would decide anyway: probed, then declared, then the limit.
  const candidates: Array<[number | undefined, BudgetSource]> = [
    [probed, "probed"],
    [declared, probed === undefined ? "declared" : "probed-capped-by-declared"],
    [limit, "memory-limit"],
  ];
  let best: [number, BudgetSource] | undefined;
  for (const [bytes, source] of candidates) {
    if (bytes !== undefined && (best === undefined || bytes < best[0])) best = [bytes, source];
  }
  return best === undefined ? undefined : { bytes: Math.floor(best[0] / headroom), source: best[1] };
}

/** A node's budget in bytes (see `budgetOf`); undefined when no memory figure is known. */
export function nodeBudget(node: PlanNode, headroom = defaultHeadroom): number | undefined {
  return budgetOf(node, headroom)?.bytes;
}
