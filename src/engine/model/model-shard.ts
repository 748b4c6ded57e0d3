/**
 * ModelShard: the slice of the model one pipeline stage holds in memory: its layers (a half-open
 * range [start, end)), plus the embedding on the first stage and the final norm + lm_head on the
 * last. The same code runs the whole model in one process (range [0, L), first and last), so
 * split and single-process results are bit-identical. (Not to be confused with staging, the
 * control plane's placing of model files on nodes.)
 */
import { SequenceCache } from "./kv-cache.js";
import { applyLinear, readRow } from "./matmul.js";
import type { ModelConfig } from "./model-config.js";
import { applyRope, computeInverseFrequencies } from "./rope.js";
import { indexSafetensors, type TensorIndex } from "./safetensors.js";
import { type Linear, linearBytes, loadFloat, loadLinear, requireEntry, toFloat32 } from "./tensors.js";

export interface StageRange {
  /** First layer, inclusive. */
  start: number;
  /** Last layer, exclusive. */
  end: number;
}

interface Layer {
  inputNorm: Float32Array;
  q: Linear;
  k: Linear;
  v: Linear;
  o: Linear;
  postNorm: Float32Array;
  gate: Linear;
  up: Linear;
  down: Linear;
}

export class ModelShard {
  readonly first: boolean;
  readonly last: boolean;
  /** Bytes of weights held in memory. */
  readonly weightBytes: number;
  private readonly inv: Float64Array;
  private scratch: Scratch;

  private constructor(
    readonly config: ModelConfig,
    readonly range: StageRange,
    private readonly layers: Layer[],
    private readonly embedding: Linear | undefined,
    private readonly finalNorm: Float32Array | undefined,
    private readonly lmHead: Linear | undefined,
  ) {
    this.first = range.start === 0;
    this.last = range.end === config.layers;
    this.inv = computeInverseFrequencies(config);
    this.scratch = new Scratch(config, 1);
    let bytes = 0;
    for (const l of layers) {
      bytes += (l.inputNorm.length + l.postNorm.length) * 4;
      for (const lin of [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]) bytes += linearBytes(lin);
    }
    if (embedding !== undefined) bytes += linearBytes(embedding);
    if (lmHead !== undefined && lmHead !== embedding) bytes += linearBytes(lmHead);
    this.weightBytes = bytes;
  }

  /** Load the tensors of `range` from the model in `dir` (only those, read by offset). */
  static load(dir: string, config: ModelConfig, range: StageRange): ModelShard {
    if (!(range.start >= 0 && range.start < range.end && range.end <= config.layers)) {
      throw new Error(`layer range [${range.start}, ${range.end}) is not within the model's ${config.layers} layers`);
    }
    const tensors = indexSafetensors(dir);
    const groupSize = config.quantization?.groupSize;
    const norm = (name: string): Float32Array => toFloat32(loadFloat(requireEntry(tensors, name)));
    const layers: Layer[] = [];
    for (let l = range.start; l < range.end; l++) {
      const p = `model.layers.${l}`;
      layers.push({
        inputNorm: norm(`${p}.input_layernorm.weight`),
        q: loadLinear(tensors, `${p}.self_attn.q_proj`, groupSize),
        k: loadLinear(tensors, `${p}.self_attn.k_proj`, groupSize),
        v: loadLinear(tensors, `${p}.self_attn.v_proj`, groupSize),
        o: loadLinear(tensors, `${p}.self_attn.o_proj`, groupSize),
        postNorm: norm(`${p}.post_attention_layernorm.weight`),
        gate: loadLinear(tensors, `${p}.mlp.gate_proj`, groupSize),
        up: loadLinear(tensors, `${p}.mlp.up_proj`, groupSize),
        down: loadLinear(tensors, `${p}.mlp.down_proj`, groupSize),
      });
    }
    const first = range.start === 0;
    const last = range.end === config.layers;
    const tied = config.tieWordEmbeddings || !hasPrefix(tensors, "lm_head.");
    const embedding = first || (last && tied) ? loadLinear(tensors, "model.embed_tokens", groupSize) : undefined;
    const finalNorm = last ? norm("model.norm.weight") : undefined;
    const lmHead = last ? (tied ? embedding : loadLinear(tensors, "lm_head", groupSize)) : undefined;
    return new ModelShard(config, range, layers, embedding, finalNorm, lmHead);
  }

  // Released caches kept for reuse, so sequences do not churn large typed arrays (which the
  // garbage collector returns late, inflating resident memory). At most `maxIdleCaches`.
  private readonly idleCaches: SequenceCache[] = [];
  private static readonly maxIdleCaches = 8;

  /** An empty KV cache for one sequence on this stage (reused when one was released). */
  createCache(): SequenceCache {
    const reused = this.idleCaches.pop();
    if (reused !== undefined) return reused;
    return new SequenceCache(this.layers.length, this.config.kvHeads * this.config.headDim, this.config.maxPositions);
  }

  /** Hand a finished sequence's cache back for reuse. */
  releaseCache(cache: SequenceCache): void {
    cache.reset();
    if (this.idleCaches.length < ModelShard.maxIdleCaches) this.idleCaches.push(cache);
  }

  /** Embedding rows of `tokens` (first stage only): `tokens.length × hidden` floats. */
  embed(tokens: ArrayLike<number>): Float32Array {
    if (this.embedding === undefined) throw new Error("embed() called on a stage without the embedding");
    const h = this.config.hiddenSize;
    const out = new Float32Array(tokens.length * h);
    for (let t = 0; t < tokens.length; t++) {
      const id = tokens[t] as number;
      if (!(id >= 0 && id < this.embedding.out)) throw new Error(`token id ${id} is outside the vocabulary`);
      readRow(this.embedding, id, out, t * h);
    }
    return out;
  }

  /**
   * Run this stage's layers over `rows` hidden vectors in place, at positions
   * cache.length .. cache.length + rows - 1, appending their keys and values to `cache`.
   */
  forward(cache: SequenceCache, hidden: Float32Array, rows: number): void {
    const c = this.config;
    const start = cache.length;
    cache.reserve(start + rows);
    if (this.scratch.rows < rows) this.scratch = new Scratch(c, rows);
    const s = this.scratch;
    const h = c.hiddenSize;
    const qWidth = c.heads * c.headDim;
    const kvWidth = c.kvHeads * c.headDim;
    for (let li = 0; li < this.layers.length; li++) {
      const layer = this.layers[li] as Layer;
      rmsNorm(hidden, layer.inputNorm, rows, h, c.rmsNormEps, s.normed);
      applyLinear(layer.q, s.normed, rows, s.q, s.groupSums);
      applyLinear(layer.k, s.normed, rows, s.k, s.groupSums);
      applyLinear(layer.v, s.normed, rows, s.v, s.groupSums);
      const keys = cache.keys[li] as Float32Array;
      const values = cache.values[li] as Float32Array;
      for (let r = 0; r < rows; r++) {
        const pos = start + r;
        applyRope(s.q, r * qWidth, c.heads, c.headDim, pos, this.inv, s.cos, s.sin);
        applyRope(s.k, r * kvWidth, c.kvHeads, c.headDim, pos, this.inv, s.cos, s.sin);
        keys.set(s.k.subarray(r * kvWidth, (r + 1) * kvWidth), pos * kvWidth);
        values.set(s.v.subarray(r * kvWidth, (r + 1) * kvWidth), pos * kvWidth);
      }
      for (let r = 0; r < rows; r++) attend(c, s, keys, values, r, start + r);
      applyLinear(layer.o, s.attn, rows, s.normed, s.groupSums);
      for (let i = 0; i < rows * h; i++) hidden[i] = (hidden[i] as number) + (s.normed[i] as number);
      rmsNorm(hidden, layer.postNorm, rows, h, c.rmsNormEps, s.normed);
      applyLinear(layer.gate, s.normed, rows, s.gate, s.groupSums);
      applyLinear(layer.up, s.normed, rows, s.up, s.groupSums);
      for (let i = 0; i < rows * c.intermediateSize; i++) {
        const g = s.gate[i] as number;
        s.gate[i] = (g / (1 + Math.exp(-g))) * (s.up[i] as number);
      }
      applyLinear(layer.down, s.gate, rows, s.normed, s.groupSums);
      for (let i = 0; i < rows * h; i++) hidden[i] = (hidden[i] as number) + (s.normed[i] as number);
    }
    cache.length = start + rows;
  }

  /** Final norm + lm_head of hidden row `row` (last stage only): vocab logits. */
  logits(hidden: Float32Array, row: number, out: Float32Array = new Float32Array(this.config.vocabSize)): Float32Array {
    if (this.lmHead === undefined || this.finalNorm === undefined) throw new Error("logits() called on a stage without lm_head");
    const h = this.config.hiddenSize;
    const normed = new Float32Array(h);
    rmsNorm(hidden.subarray(row * h, (row + 1) * h), this.finalNorm, 1, h, this.config.rmsNormEps, normed);
    applyLinear(this.lmHead, normed, 1, out, this.scratch.groupSums);
    return out;
  }
}

function hasPrefix(tensors: TensorIndex, prefix: string): boolean {
  for (const name of tensors.keys()) if (name.startsWith(prefix)) return true;
  return false;
}

/** Working buffers for a batch of `rows` positions, reused across calls. */
class Scratch {
  normed: Float32Array;
  q: Float32Array;
  k: Float32Array;
  v: Float32Array;
  attn: Float32Array;
  gate: Float32Array;
  up: Float32Array;
  scores: Float32Array;
  groupSums: Float32Array;
  cos: Float64Array;
  sin: Float64Array;

  constructor(
    c: ModelConfig,
    readonly rows: number,
  ) {
    const width = Math.max(c.hiddenSize, c.heads * c.headDim);
    this.normed = new Float32Array(rows * width);
    this.q = new Float32Array(rows * c.heads * c.headDim);
    this.k = new Float32Array(rows * c.kvHeads * c.headDim);
    this.v = new Float32Array(rows * c.kvHeads * c.headDim);
    this.attn = new Float32Array(rows * c.heads * c.headDim);
    this.gate = new Float32Array(rows * c.intermediateSize);
    this.up = new Float32Array(rows * c.intermediateSize);
    this.scores = new Float32Array(c.maxPositions);
    this.groupSums = new Float32Array(Math.max(c.hiddenSize, c.intermediateSize, c.heads * c.headDim));
    this.cos = new Float64Array(c.headDim / 2);
    this.sin = new Float64Array(c.headDim / 2);
  }
}

function rmsNorm(x: Float32Array, weight: Float32Array, rows: number, h: number, eps: number, out: Float32Array): void {
  for (let r = 0; r < rows; r++) {
    const off = r * h;
    let ss = 0;
    for (let i = 0; i < h; i++) {
      const v = x[off + i] as number;
      ss += v * v;
    }
    const scale = 1 / Math.sqrt(ss / h + eps);
    for (let i = 0; i < h; i++) out[off + i] = (x[off + i] as number) * scale * (weight[i] as number);
  }
}

/** Causal grouped-query attention of query row `r` (at position `pos`) over cached positions 0..pos. */
function attend(c: ModelConfig, s: Scratch, keys: Float32Array, values: Float32Array, r: number, pos: number): void {
  const d = c.headDim;
  const kvWidth = c.kvHeads * d;
  const group = c.heads / c.kvHeads;
  const scale = 1 / Math.sqrt(d);
  const scores = s.scores;
  for (let head = 0; head < c.heads; head++) {
    const qOff = r * c.heads * d + head * d;
    const kvOff = Math.floor(head / group) * d;
    let max = -Infinity;
    for (let j = 0; j <= pos; j++) {
      let dot = 0;
      const kOff = j * kvWidth + kvOff;
      for (let i = 0; i < d; i++) dot += (s.q[qOff + i] as number) * (keys[kOff + i] as number);
      const score = dot * scale;
      scores[j] = score;
      if (score > max) max = score;
    }
    let sum = 0;
    for (let j = 0; j <= pos; j++) {
      const e = Math.exp((scores[j] as number) - max);
      scores[j] = e;
      sum += e;
    }
    const outOff = qOff;
    for (let i = 0; i < d; i++) s.attn[outOff + i] = 0;
    for (let j = 0; j <= pos; j++) {
      const w = (scores[j] as number) / sum;
      const vOff = j * kvWidth + kvOff;
      for (let i = 0; i < d; i++) s.attn[outOff + i] = (s.attn[outOff + i] as number) + w * (values[vOff + i] as number);
    }
  }
}
