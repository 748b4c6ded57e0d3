/** What the memory-weighted split needs per stage position and per layer (bytes). */
export interface SplitInput {
  /** Weights + KV of each layer. */
  layerCost: readonly number[];
  /** Per-stage budget, in stage order. */
  budgets: readonly number[];
  /** Extra bytes on the first stage (embedding). */
  firstExtra: number;
  /** Extra bytes on the last stage (final norm, lm_head, tied embedding). */
  lastExtra: number;
}

/**
 * Contiguous split minimising the largest fit ratio (stage bytes / stage budget), at least one
 * layer per stage. Exact: dynamic programming over split points, O(stages × layers²) — 0.5 M
 * steps for 126 layers × 30 stages. Returns layer counts per stage; needs layers ≥ stages.
 */
export function memorySplit(input: SplitInput): number[] {
  const { layerCost, budgets, firstExtra, lastExtra } = input;
  const n = budgets.length;
  const layers = layerCost.length;
  if (n < 1 || layers < n) throw new RangeError(`memorySplit needs 1 ≤ stages ≤ layers, got ${n} stages and ${layers} layers`);
  const prefix = new Float64Array(layers + 1);
  for (let i = 0; i < layers; i++) prefix[i + 1] = prefix[i]! + layerCost[i]!;
  const fit = (stage: number, s: number, e: number): number => {
    const extra = (stage === 0 ? firstExtra : 0) + (stage === n - 1 ? lastExtra : 0);
    return (prefix[e]! - prefix[s]! + extra) / budgets[stage]!;
  };

  // best[i][e]: smallest achievable max fit of stages 0..i covering layers [0, e); from[i][e]: start of stage i.
  const best: Float64Array[] = [];
  const from: Int32Array[] = [];
  for (let i = 0; i < n; i++) {
    const row = new Float64Array(layers + 1).fill(Number.POSITIVE_INFINITY);
    const arg = new Int32Array(layers + 1).fill(-1);
    // Stage i ends somewhere leaving ≥ 1 layer for each later stage.
    const lo = i + 1;
    const hi = i === n - 1 ? layers : layers - (n - 1 - i);
    for (let e = lo; e <= hi; e++) {
      if (i === 0) {
        row[e] = fit(0, 0, e);
        arg[e] = 0;
        continue;
      }
      const prev = best[i - 1]!;
      for (let s = i; s < e; s++) {
        const value = Math.max(prev[s]!, fit(i, s, e));
        if (value < row[e]! || arg[e] === -1) {
          row[e] = value;
          arg[e] = s;
        }
      }
    }
    best.push(row);
    from.push(arg);
  }

  const counts = new Array<number>(n).fill(0);
  let end = layers;
  for (let i = n - 1; i >= 0; i--) {
    const start = from[i]![end]!;
    counts[i] = end - start;
    end = start;
  }
  return counts;
}
