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
  /**
   * Whether the chosen token's log probability is wanted (the request asked for logprobs): it costs
   * an exp per token of the vocabulary (1.5 ms for Llama 3's 128 256 on a 2-core virtual machine).
   */
  logprobs: boolean;
  /** How many alternatives to report with each token's log probability, 0..20 (only with `logprobs`). */
  topLogprobs: number;
}

export interface SampledToken {
  token: number;
  /** Natural-log probability of `token`; NaN when the params did not ask for it. */
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
    const token = this.params.temperature <= 0 ? argmax : this.draw(logits, max);
    if (!this.params.logprobs) return { token, logprob: NaN, top: [] };
    let sum = 0;
    for (let i = 0; i < n; i++) sum += Math.exp((logits[i] as number) - max);
    const logZ = max + Math.log(sum);
    return { token, logprob: (logits[token] as number) - logZ, top: topK(logits, this.params.topLogprobs, logZ) };
  }

  /**
   * A token drawn from softmax(logits / temperature), within the nucleus when top_p < 1: the most
   * likely tokens (by weight, then by index) whose running share of the mass first reaches top_p.
   */
  private draw(logits: Float32Array, max: number): number {
    const n = logits.length;
    const t = this.params.temperature;
    const weights = weightScratch(n);
    let sum = 0;
    for (let i = 0; i < n; i++) {
      const w = Math.exp(((logits[i] as number) - max) / t);
      weights[i] = w;
      sum += w;
    }
    if (this.params.topP >= 1) {
      // Every token, in index order: their total is `sum`, added up in that same order.
      let u = this.random() * sum;
      for (let i = 0; i < n; i++) {
        u -= weights[i] as number;
        if (u < 0) return i;
      }
      return n - 1;
    }
    const candidates = nucleusOf(weights, n, sum, this.params.topP);
    let total = 0;
    for (const i of candidates) total += weights[i] as number;
    let u = this.random() * total;
    for (const i of candidates) {
      u -= weights[i] as number;
      if (u < 0) return i;
    }
    return candidates[candidates.length - 1] as number;
  }
}

/**
 * The draw's weights, one per token of the vocabulary (8 bytes each: 1 MiB for 128 Ki tokens),
 * kept from token to token instead of allocated for each: sampling runs on one thread, one token at
 * a time, and uses them only within one draw.
 */
let scratch = new Float64Array(0);

function weightScratch(n: number): Float64Array {
  if (scratch.length < n) scratch = new Float64Array(n);
  return scratch;
}

/**
 * Weight floors the nucleus is looked for above, as fractions of the heaviest token's weight (1),
 * heaviest first: a model's distribution puts its top_p mass on a few tokens, so sorting those few
 * instead of the whole vocabulary (128 256 tokens for Llama 3: 42–68 ms a token on a 2-core virtual
 * machine) finds the same nucleus. Steps of ten keep a wide spread's subset near the nucleus's size.
 */
const nucleusFloors = [1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8, 1e-9];

/**
 * How far a subset's share of the mass, added up in index order, may be from its running share in
 * sorted order (rounding: about the vocabulary's size × 2^-53). A subset short of top_p by more
 * cannot hold the nucleus and is not sorted. This only saves time: a subset skipped that held it
 * would be found again within the next floor's, which contains it.
 */
const shareRounding = 1e-9;

/**
 * The nucleus: tokens by weight, heaviest first (ties by index), up to the first whose running share
 * of `sum` (each weight ÷ sum, added in that order) reaches `topP`; every token when none does.
 * Every token at or above a floor comes before every token below it in that order, with the same
 * running shares, so a nucleus found among them is the nucleus of the whole vocabulary; when it is
 * not found there, the next floor is tried, and at last the whole vocabulary is sorted.
 */
function nucleusOf(weights: Float64Array, n: number, sum: number, topP: number): number[] {
  const heavierFirst = (a: number, b: number): number => (weights[b] as number) - (weights[a] as number) || a - b;
  const prefixReaching = (order: number[]): number[] | undefined => {
    let mass = 0;
    for (let k = 0; k < order.length; k++) {
      mass += (weights[order[k] as number] as number) / sum;
      if (mass >= topP) return order.slice(0, k + 1);
    }
    return undefined;
  };
  for (const floor of nucleusFloors) {
    const above: number[] = [];
    let share = 0;
    for (let i = 0; i < n; i++) {
      const w = weights[i] as number;
      if (w >= floor) {
        above.push(i);
        share += w;
      }
    }
    if (share / sum < topP - shareRounding) continue;
    const nucleus = prefixReaching(above.sort(heavierFirst));
    if (nucleus !== undefined) return nucleus;
  }
  const order = Array.from({ length: n }, (_, i) => i).sort(heavierFirst);
  return prefixReaching(order) ?? order;
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
