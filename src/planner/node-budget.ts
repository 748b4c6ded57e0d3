import { defaultEngineKind, engineOf } from "../engines/index.js";

/** A node the plan may place a stage on. Memory figures are bytes. */
export interface PlanNode {
  name: string;
  /** Declared (registry) or probed total memory. */
  memoryBytes?: number;
  /** Probed free memory, when known; preferred over memoryBytes. */
  availableBytes?: number;
  /** Cap on what the engine may use (the registry's memory_limit, MLXCEL_MEMORY_LIMIT). */
  memoryLimitBytes?: number;
  /** Accelerator family, e.g. "apple-m2-ultra" or "metal"; clusters must be homogeneous. */
  accelerator?: string;
  /** Engine version the node runs; clusters must be homogeneous. */
  engineVersion?: string;
}

/** The budget divisor when a caller names none: the default engine's memoryHeadroom. */
export const defaultHeadroom = engineOf(defaultEngineKind).memoryHeadroom;

/**
 * A node's budget (bytes): its free memory when probed, else its declared memory, capped by its
 * memory limit, divided by `headroom` (default `defaultHeadroom`). Undefined when no memory
 * figure is known.
 */
export function nodeBudget(node: PlanNode, headroom = defaultHeadroom): number | undefined {
  const known = node.availableBytes ?? node.memoryBytes;
  const limit = node.memoryLimitBytes;
  const raw = known === undefined ? limit : limit === undefined ? known : Math.min(known, limit);
  return raw === undefined ? undefined : Math.floor(raw / headroom);
}
