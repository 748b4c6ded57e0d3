/**
 * ModelShard: the slice of the model one pipeline stage holds in memory: its layers (a half-open
 * range [start, end)), plus the embedding on the first stage and the final norm + lm_head on the
 * last. The same code runs the whole model in one process (range [0, L), first and last), so
 * split and single-process results are bit-identical. (Not to be confused with staging, the
 * control plane's placing of model files on nodes.)
 *
 * Weights live in kernel arenas in their stored format; the products and attention run in the
 * WebAssembly kernels on `threads` threads, the element-wise steps (norms, RoPE, SwiGLU, residuals)
 * here. Every row's arithmetic is independent of the other rows, of the thread count and of how
 * a prompt is chunked, which is what makes the bit-identity hold.
 */
import { KernelRuntime, type LinearWeights, linearBytes, minSharedWork, readRow, runAttention, runLinears, runSwiglu } from "../kernels/index.js";
import { SequenceCache } from "./kv-cache.js";
import type { ModelConfig } from "./model-config.js";
import { applyRope, computeInverseFrequencies } from "./rope.js";
import { indexSafetensors, type TensorIndex } from "./safetensors.js";
import { loadLinear, loadVector, requireEntry } from "./tensors.js";

export interface StageRange {
  /** First layer, inclusive. */
  start: number;
  /** Last layer, exclusive. */
  end: number;
}

export interface ShardOptions {
  /** The kernel runtime to load into (its threads are then the shard's). Default: a new one. */
  runtime?: KernelRuntime;
  /** Threads computing each product, the caller's included, for a new runtime. Default 1. */
  threads?: number;
  /** Weight bytes per kernel arena, for a new runtime (see KernelRuntime). Default 3 GiB. */
  arenaWeightBytes?: number;
  /** Multiply-adds below which a product stays on the calling thread, for a new runtime. Default 512 × 512. */
  minSharedWork?: number;
  /** Whether products stay on the caller while sharing costs it time, for a new runtime. Default true. */
  judgeSharing?: boolean;
}

/** Prompt rows computed together: a longer prompt runs in chunks of this many, bounding scratch memory. */
const chunkRows = 32;

/**
 * The threads worth starting for `config` when `requested` are asked for: 1 when even its largest
 * per-token product (the fused gate and up projections, or lm_head) is too small to share
 * (minSharedWork), as with the few-thousand-parameter test models — kernel threads would only add
 * their start-up time.
 */
export function usefulThreads(config: ModelConfig, requested: number): number {
  const largest = Math.max(2 * config.hiddenSize * config.intermediateSize, config.hiddenSize * config.vocabSize);
  return largest < minSharedWork ? 1 : requested;
}

interface Layer {
  inputNorm: Float32Array;
  q: LinearWeights;
  k: LinearWeights;
  v: LinearWeights;
  o: LinearWeights;
  postNorm: Float32Array;
  gate: LinearWeights;
  up: LinearWeights;
  down: LinearWeights;
}

export class ModelShard {
  readonly first: boolean;
  readonly last: boolean;
  /** Bytes of weights held in memory. */
  readonly weightBytes: number;
  private readonly inv: Float64Array;
  private scratch: Scratch;
  private readonly cos: Float64Array;
  private readonly sin: Float64Array;

  private constructor(
    readonly config: ModelConfig,
    readonly range: StageRange,
    private readonly runtime: KernelRuntime,
    private readonly layers: Layer[],
    private readonly embedding: LinearWeights | undefined,
    private readonly finalNorm: Float32Array | undefined,
    private readonly lmHead: LinearWeights | undefined,
  ) {
    this.first = range.start === 0;
    this.last = range.end === config.layers;
    this.inv = computeInverseFrequencies(config);
    this.cos = new Float64Array(config.headDim / 2);
    this.sin = new Float64Array(config.headDim / 2);
    this.scratch = new Scratch(runtime, config, 1);
    let bytes = 0;
    for (const l of layers) {
      bytes += (l.inputNorm.length + l.postNorm.length) * 4;
      for (const lin of [l.q, l.k, l.v, l.o, l.gate, l.up, l.down]) bytes += linearBytes(lin);
    }
    if (embedding !== undefined) bytes += linearBytes(embedding);
    if (lmHead !== undefined && lmHead !== embedding) bytes += linearBytes(lmHead);
    if (finalNorm !== undefined) bytes += finalNorm.length * 4;
    this.weightBytes = bytes;
  }

  /** Load the tensors of `range` from the model in `dir` (only those, read by offset). */
  static load(dir: string, config: ModelConfig, range: StageRange, options: ShardOptions = {}): ModelShard {
    if (!(range.start >= 0 && range.start < range.end && range.end <= config.layers)) {
      throw new Error(`layer range [${range.start}, ${range.end}) is not within the model's ${config.layers} layers`);
    }
    const runtime = options.runtime ?? new KernelRuntime(options);
    try {
      const tensors = indexSafetensors(dir);
      const groupSize = config.quantization?.groupSize;
      const norm = (name: string): Float32Array => loadVector(requireEntry(tensors, name));
      const c = config;
      // Each product's [out, in] as config.json gives it, with the fields named: the kernels index
      // the weights by these sizes, so a config that disagrees with the tensors (run by hand, not
      // checked by a plan) must stop the load rather than compute on misread weights.
      const linear = (prefix: string, out: [number, string], inner: [number, string]): LinearWeights => {
        const w = loadLinear(runtime, tensors, prefix, groupSize);
        if (w.out !== out[0] || w.in !== inner[0]) {
          throw new Error(
            `tensor ${prefix} is [${w.out}, ${w.in}] but config.json says [${out[0]}, ${inner[0]}] (${out[1]}, ${inner[1]}): the config is not this model's`,
          );
        }
        return w;
      };
      const hidden: [number, string] = [c.hiddenSize, "hidden_size"];
      const attention: [number, string] = [c.heads * c.headDim, "num_attention_heads × head_dim"];
      const kv: [number, string] = [c.kvHeads * c.headDim, "num_key_value_heads × head_dim"];
      const mlp: [number, string] = [c.intermediateSize, "intermediate_size"];
      const vocab: [number, string] = [c.vocabSize, "vocab_size"];
      const layers: Layer[] = [];
      for (let l = range.start; l < range.end; l++) {
        const p = `model.layers.${l}`;
        layers.push({
          inputNorm: norm(`${p}.input_layernorm.weight`),
          q: linear(`${p}.self_attn.q_proj`, attention, hidden),
          k: linear(`${p}.self_attn.k_proj`, kv, hidden),
          v: linear(`${p}.self_attn.v_proj`, kv, hidden),
          o: linear(`${p}.self_attn.o_proj`, hidden, attention),
          postNorm: norm(`${p}.post_attention_layernorm.weight`),
          gate: linear(`${p}.mlp.gate_proj`, mlp, hidden),
          up: linear(`${p}.mlp.up_proj`, mlp, hidden),
          down: linear(`${p}.mlp.down_proj`, hidden, mlp),
        });
      }
      const first = range.start === 0;
      const last = range.end === config.layers;
      const tied = config.tieWordEmbeddings || !hasPrefix(tensors, "lm_head.");
      const embedding = first || (last && tied) ? linear("model.embed_tokens", vocab, hidden) : undefined;
      const finalNorm = last ? norm("model.norm.weight") : undefined;
      const lmHead = last ? (tied ? embedding : linear("lm_head", vocab, hidden)) : undefined;
      return new ModelShard(config, range, runtime, layers, embedding, finalNorm, lmHead);
    } catch (error) {
      void runtime.close();
      throw error;
    }
  }

  /** Threads computing each product. */
  get threads(): number {
    return this.runtime.threads;
  }

  /** Product chunks the calling thread took over from a late kernel thread, since load (a busy machine's sign). */
  get stolenChunks(): number {
    return this.runtime.pool.stolenChunks;
  }

  /** Times sharing products with the kernel threads was paused because it saved no time, since load. */
  get sharingPauses(): number {
    return this.runtime.pool.judge.pauses;
  }

  /** Resolves once every kernel thread has started (products are correct before, on fewer threads). */
  ready(): Promise<void> {
    return this.runtime.ready();
  }

  /** Stop the kernel threads; the shard is unusable afterwards. */
  close(): Promise<void> {
    return this.runtime.close();
  }

  // Released caches kept for reuse, so sequences do not churn arena memory. At most `maxIdleCaches`.
  private readonly idleCaches: SequenceCache[] = [];
  private static readonly maxIdleCaches = 8;

  /** An empty KV cache for one sequence on this stage (reused when one was released). */
  createCache(): SequenceCache {
    const reused = this.idleCaches.pop();
    if (reused !== undefined) return reused;
    const width = this.config.kvHeads * this.config.headDim;
    // Arena pages cost memory only once written, so a roomy first block costs address space, not
    // resident memory, and spares typical sequences the copies (and the abandoned smaller blocks)
    // of growing: up to 256 positions, within 16 MiB.
    const bytesPerPosition = 2 * this.layers.length * width * 4;
    const initial = Math.max(16, Math.min(256, Math.floor((16 * 1024 * 1024) / bytesPerPosition)));
    return new SequenceCache(this.runtime.home, this.layers.length, width, this.config.maxPositions, initial);
  }

  /** Hand a finished sequence's cache back for reuse. */
  releaseCache(cache: SequenceCache): void {
    cache.reset();
    if (this.idleCaches.length < ModelShard.maxIdleCaches) this.idleCaches.push(cache);
    else cache.free();
  }

  /** Embedding rows of `tokens` (first stage only): `tokens.length × hidden` floats. */
  embed(tokens: ArrayLike<number>): Float32Array {
    if (this.embedding === undefined) throw new Error("embed() called on a stage without the embedding");
    const h = this.config.hiddenSize;
    const out = new Float32Array(tokens.length * h);
    for (let t = 0; t < tokens.length; t++) {
      const id = tokens[t] as number;
      if (!(id >= 0 && id < this.embedding.out)) throw new Error(`token id ${id} is outside the vocabulary`);
      readRow(this.runtime, this.embedding, id, out, t * h);
    }
    return out;
  }

  /**
   * Run this stage's layers over `rows` hidden vectors in place, at positions
   * cache.length .. cache.length + rows - 1, appending their keys and values to `cache`.
   * `progress` is called after each layer of each chunk of rows (a stage's compute heartbeat
   * vouches only for a computation that moves).
   */
  forward(cache: SequenceCache, hidden: Float32Array, rows: number, progress?: () => void): void {
    const h = this.config.hiddenSize;
    cache.reserve(cache.length + rows);
    for (let done = 0; done < rows;) {
      const n = Math.min(chunkRows, rows - done);
      const chunk = hidden.subarray(done * h, (done + n) * h);
      this.forwardChunk(cache, chunk, n, progress);
      done += n;
    }
  }

  private forwardChunk(cache: SequenceCache, hidden: Float32Array, rows: number, progress: (() => void) | undefined): void {
    const c = this.config;
    const start = cache.length;
    if (this.scratch.rows < rows) this.scratch = new Scratch(this.runtime, c, Math.min(chunkRows, Math.max(rows, this.scratch.rows * 2)));
    const s = this.scratch;
    const h = c.hiddenSize;
    const qWidth = c.heads * c.headDim;
    const kvWidth = c.kvHeads * c.headDim;
    const x = s.view.hidden;
    x.set(hidden);
    for (let li = 0; li < this.layers.length; li++) {
      const layer = this.layers[li] as Layer;
      rmsNorm(x, layer.inputNorm, rows, h, c.rmsNormEps, s.view.normed);
      runLinears(
        this.runtime,
        [
          { weights: layer.q, x: s.at.normed, y: s.at.q },
          { weights: layer.k, x: s.at.normed, y: s.at.k },
          { weights: layer.v, x: s.at.normed, y: s.at.v },
        ],
        rows,
      );
      const keys = cache.keys(li);
      const values = cache.values(li);
      for (let r = 0; r < rows; r++) {
        const pos = start + r;
        applyRope(s.view.q, r * qWidth, c.heads, c.headDim, pos, this.inv, this.cos, this.sin);
        applyRope(s.view.k, r * kvWidth, c.kvHeads, c.headDim, pos, this.inv, this.cos, this.sin);
        keys.set(s.view.k.subarray(r * kvWidth, (r + 1) * kvWidth), pos * kvWidth);
        values.set(s.view.v.subarray(r * kvWidth, (r + 1) * kvWidth), pos * kvWidth);
      }
      runAttention(this.runtime, {
        q: s.at.q,
        keys: cache.keysAt(li),
        values: cache.valuesAt(li),
        out: s.at.attn,
        rows,
        start,
        heads: c.heads,
        kvHeads: c.kvHeads,
        headDim: c.headDim,
      });
      runLinears(this.runtime, [{ weights: layer.o, x: s.at.attn, y: s.at.proj }], rows);
      addInPlace(x, s.view.proj, rows * h);
      rmsNorm(x, layer.postNorm, rows, h, c.rmsNormEps, s.view.normed);
      runLinears(
        this.runtime,
        [
          { weights: layer.gate, x: s.at.normed, y: s.at.gate },
          { weights: layer.up, x: s.at.normed, y: s.at.up },
        ],
        rows,
      );
      runSwiglu(this.runtime, { gate: s.at.gate, up: s.at.up, count: rows * c.intermediateSize });
      runLinears(this.runtime, [{ weights: layer.down, x: s.at.gate, y: s.at.proj }], rows);
      addInPlace(x, s.view.proj, rows * h);
      progress?.();
    }
    hidden.set(x.subarray(0, rows * h));
    cache.length = start + rows;
  }

  /** Final norm + lm_head of hidden row `row` (last stage only): vocab logits. */
  logits(hidden: Float32Array, row: number, out: Float32Array = new Float32Array(this.config.vocabSize)): Float32Array {
    if (this.lmHead === undefined || this.finalNorm === undefined) throw new Error("logits() called on a stage without lm_head");
    const h = this.config.hiddenSize;
    const s = this.scratch;
    rmsNorm(hidden.subarray(row * h, (row + 1) * h), this.finalNorm, 1, h, this.config.rmsNormEps, s.view.normed);
    const logits = this.runtime.buffer(this.runtime.home, "logits", this.lmHead.out * 4);
    runLinears(this.runtime, [{ weights: this.lmHead, x: s.at.normed, y: logits }], 1);
    out.set(this.runtime.home.f32(logits, this.lmHead.out));
    return out;
  }
}

function hasPrefix(tensors: TensorIndex, prefix: string): boolean {
  for (const name of tensors.keys()) if (name.startsWith(prefix)) return true;
  return false;
}

type ScratchName = "hidden" | "normed" | "q" | "k" | "v" | "attn" | "proj" | "gate" | "up";

/** Working buffers for a batch of `rows` positions in the home arena: addresses and f32 views. */
class Scratch {
  readonly at: Record<ScratchName, number>;
  readonly view: Record<ScratchName, Float32Array>;

  constructor(
    runtime: KernelRuntime,
    c: ModelConfig,
    readonly rows: number,
  ) {
    const qWidth = c.heads * c.headDim;
    const kvWidth = c.kvHeads * c.headDim;
    const widths: Record<ScratchName, number> = {
      hidden: c.hiddenSize,
      normed: Math.max(c.hiddenSize, qWidth),
      q: qWidth,
      k: kvWidth,
      v: kvWidth,
      attn: qWidth,
      proj: c.hiddenSize,
      gate: c.intermediateSize,
      up: c.intermediateSize,
    };
    const at = {} as Record<ScratchName, number>;
    const view = {} as Record<ScratchName, Float32Array>;
    for (const [name, width] of Object.entries(widths) as Array<[ScratchName, number]>) {
      at[name] = runtime.buffer(runtime.home, name, rows * width * 4);
      view[name] = runtime.home.f32(at[name], rows * width);
    }
    this.at = at;
    this.view = view;
  }
}

function addInPlace(x: Float32Array, y: Float32Array, n: number): void {
  for (let i = 0; i < n; i++) x[i] = (x[i] as number) + (y[i] as number);
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
