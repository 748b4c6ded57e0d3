/**
 * Token choice written the plain way, for tests and benches to hold the engine's sampler against:
 * every token's weight, the whole vocabulary sorted for the nucleus. The same random generator and
 * the same floating-point operations in the same order as the engine's definition, so the two must
 * choose the same tokens.
 */
import { createRng, type SamplingParams } from "../../src/engine/model/index.js";

/** Logits of `n` tokens drawn by `shape` (given the generator and the token's index) from a seeded generator. */
export function seededLogits(n: number, shape: (random: () => number, i: number) => number, seed: number): Float32Array {
  const random = createRng(seed);
  return Float32Array.from({ length: n }, (_, i) => shape(random, i));
}

/** A logit drawn from a normal distribution of spread `sigma` (Box–Muller). */
export const normal =
  (sigma: number) =>
  (random: () => number): number =>
    sigma * Math.sqrt(-2 * Math.log(random() || 1e-12)) * Math.cos(2 * Math.PI * random());

export class ReferenceSampler {
  private readonly random: () => number;

  constructor(private readonly params: SamplingParams) {
    this.random = createRng(params.seed);
  }

  /** The chosen token (greedy at temperature 0, else temperature + top_p). */
  choose(logits: Float32Array): number {
    const n = logits.length;
    let max = -Infinity;
    let argmax = 0;
    for (let i = 0; i < n; i++) {
      if ((logits[i] as number) > max) {
        max = logits[i] as number;
        argmax = i;
      }
    }
    if (this.params.temperature <= 0) return argmax;
    const probs = new Float64Array(n);
    let sum = 0;
    for (let i = 0; i < n; i++) {
      probs[i] = Math.exp(((logits[i] as number) - max) / this.params.temperature);
      sum += probs[i] as number;
    }
    let candidates = Array.from({ length: n }, (_, i) => i);
    if (this.params.topP < 1) {
      const order = candidates.sort((a, b) => (probs[b] as number) - (probs[a] as number) || a - b);
      candidates = [];
      let mass = 0;
      for (const i of order) {
        candidates.push(i);
        mass += (probs[i] as number) / sum;
        if (mass >= this.params.topP) break;
      }
    }
    let total = 0;
    for (const i of candidates) total += probs[i] as number;
    let u = this.random() * total;
    for (const i of candidates) {
      u -= probs[i] as number;
      if (u < 0) return i;
    }
    return candidates[candidates.length - 1] as number;
  }

  /** Natural-log probability of `token` under softmax(logits). */
  logprobOf(logits: Float32Array, token: number): number {
    let max = -Infinity;
    for (const v of logits) if (v > max) max = v;
    let sum = 0;
    for (const v of logits) sum += Math.exp(v - max);
    return (logits[token] as number) - (max + Math.log(sum));
  }
}
