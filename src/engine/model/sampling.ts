/**
 * Token choice on the last stage: greedy at temperature 0, otherwise temperature + nucleus (top_p)
 * sampling from a per-sequence seeded generator, so a seed reproduces a completion. Log
 * probabilities are those of the model's raw distribution (before temperature and top_p).
 */

export interface SamplingParams {
  /** 0 = greedy. Default 1 at the API. */
  temperature: number;
  /** Nucleus mass in (0, 1]. */
  topP: number;
  /** Generator seed, u32. */
  seed: number;
  /** How many alternatives to report with each token's log probability, 0..20. */
  topLogprobs: number;
}

export interface SampledToken {
  token: number;
  /** Natural-log probability of `token`. */
  logprob: number;
  /** The `topLogprobs` most likely tokens, most likely first. */
  top: Array<{ token: number; logprob: number }>;
}

/** mulberry32: a small, fast, seedable 32-bit generator; returns floats in [0, 1). */
export function createRng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export class Sampler {
  private readonly random: () => number;

  constructor(readonly params: SamplingParams) {
    this.random = createRng(params.seed);
  }

  sample(logits: Float32Array): SampledToken {
    const n = logits.length;
    let max = -Infinity;
    let argmax = 0;
    for (let i = 0; i < n; i++) {
      const v = logits[i] as number;
      if (v > max) {
        max = v;
        argmax = i;
      }
    }
    let sum = 0;
    for (let i = 0; i < n; i++) sum += Math.exp((logits[i] as number) - max);
    const logZ = max + Math.log(sum);
    const token = this.params.temperature <= 0 ? argmax : this.draw(logits, max);
    return { token, logprob: (logits[token] as number) - logZ, top: topK(logits, this.params.topLogprobs, logZ) };
  }

  private draw(logits: Float32Array, max: number): number {
    const n = logits.length;
    const t = this.params.temperature;
    const probs = new Float64Array(n);
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const p = Math.exp(((logits[i] as number) - max) / t);
      probs[i] = p;
      sum += p;
    }
    let candidates: number[];
    if (this.params.topP < 1) {
      const order = Array.from({ length: n }, (_, i) => i).sort((a, b) => (probs[b] as number) - (probs[a] as number) || a - b);
      candidates = [];
      let mass = 0;
      for (const i of order) {
        candidates.push(i);
        mass += (probs[i] as number) / sum;
        if (mass >= this.params.topP) break;
      }
    } else {
      candidates = Array.from({ length: n }, (_, i) => i);
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
}

function topK(logits: Float32Array, k: number, logZ: number): Array<{ token: number; logprob: number }> {
  if (k <= 0) return [];
  const best: number[] = [];
  for (let i = 0; i < logits.length; i++) {
    const v = logits[i] as number;
    if (best.length === k && v <= (logits[best[k - 1] as number] as number)) continue;
    let at = best.length;
    while (at > 0 && v > (logits[best[at - 1] as number] as number)) at--;
    best.splice(at, 0, i);
    if (best.length > k) best.pop();
  }
  return best.map((token) => ({ token, logprob: (logits[token] as number) - logZ }));
}
