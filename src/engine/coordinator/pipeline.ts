/**
 * What the HTTP side drives: prepare a sequence, append tokens and get the next sampled token,
 * release it. Two implementations: the whole model in this process (the baseline), and remote
 * stages over TCP. Both run the same layer code, so their tokens and log probabilities are equal.
 */
import { residentMemory } from "../memory.js";
import { KernelRuntime } from "../kernels/index.js";
import { Sampler, type SampledToken, type SamplingParams, type SequenceCache, ModelShard, type ModelConfig, usefulThreads } from "../model/index.js";

export interface Pipeline {
  prepare(seq: number, params: SamplingParams): void;
  /** Append `tokens` to the sequence and sample the next one. */
  run(seq: number, tokens: readonly number[]): Promise<SampledToken>;
  /** Append `tokens` to the sequence without sampling: a chunk of a long prompt, other sequences' steps between chunks. */
  fill(seq: number, tokens: readonly number[]): Promise<void>;
  /** Drop the sequence and its KV caches everywhere (also cancels). */
  release(seq: number): void;
  /** Memory figures per stage (or of this process). */
  stats(): Promise<object[]>;
  /**
   * Run synchronous work of the event loop (parsing a request body, rendering and tokenizing a
   * prompt) while the pipeline's peers keep hearing from this process: a client's body that takes
   * seconds to parse must cost that client's answer, not the stages' liveness.
   */
  hold<T>(work: () => T): T;
}

/** The whole model in this process. */
export class LocalPipeline implements Pipeline {
  private readonly sequences = new Map<number, { cache: SequenceCache; sampler: Sampler }>();
  private readonly logits: Float32Array;
  private queue: Promise<unknown> = Promise.resolve();

  private readonly rssAfterLoad = residentMemory().rss;

  constructor(
    private readonly model: ModelShard,
    private readonly rssBeforeLoad: number,
  ) {
    this.logits = new Float32Array(model.config.vocabSize);
  }

  /** Start `threads` kernel threads, then load the whole model. */
  static async load(dir: string, config: ModelConfig, threads: number): Promise<LocalPipeline> {
    // The kernel threads are part of the idle runtime: started (and measured) before the weights.
    const runtime = new KernelRuntime({ threads: usefulThreads(config, threads) });
    await runtime.ready();
    const rssBeforeLoad = residentMemory().rss;
    return new LocalPipeline(ModelShard.load(dir, config, { start: 0, end: config.layers }, { runtime }), rssBeforeLoad);
  }

  get weightBytes(): number {
    return this.model.weightBytes;
  }

  /** Threads computing each product. */
  get threads(): number {
    return this.model.threads;
  }

  prepare(seq: number, params: SamplingParams): void {
    this.sequences.set(seq, { cache: this.model.createCache(), sampler: new Sampler(params) });
  }

  run(seq: number, tokens: readonly number[]): Promise<SampledToken> {
    return this.step(seq, tokens, true);
  }

  async fill(seq: number, tokens: readonly number[]): Promise<void> {
    await this.step(seq, tokens, false);
  }

  /** One step at a time, each after a turn of the event loop so HTTP traffic keeps flowing. */
  private step(seq: number, tokens: readonly number[], sample: true): Promise<SampledToken>;
  private step(seq: number, tokens: readonly number[], sample: false): Promise<undefined>;
  private step(seq: number, tokens: readonly number[], sample: boolean): Promise<SampledToken | undefined> {
    const next = this.queue.then(
      () =>
        new Promise<SampledToken | undefined>((resolve, reject) => {
          setImmediate(() => {
            try {
              const state = this.sequences.get(seq);
              if (state === undefined) throw new Error(`sequence ${seq} was released`);
              const hidden = this.model.embed(tokens);
              this.model.forward(state.cache, hidden, tokens.length);
              resolve(sample ? state.sampler.sample(this.model.logits(hidden, tokens.length - 1, this.logits)) : undefined);
            } catch (error) {
              reject(error as Error);
            }
          });
        }),
    );
    this.queue = next.catch(() => undefined);
    return next;
  }

  release(seq: number): void {
    const state = this.sequences.get(seq);
    this.sequences.delete(seq);
    if (state !== undefined) this.model.releaseCache(state.cache);
  }

  /** Nothing to keep alive: the whole model is in this process. */
  hold<T>(work: () => T): T {
    return work();
  }

  stats(): Promise<object[]> {
    const kvBytes = [...this.sequences.values()].reduce((s, q) => s + q.cache.bytes(), 0);
    return Promise.resolve([
      {
        nodeId: "single",
        stage: 0,
        threads: this.model.threads,
        stolenChunks: this.model.stolenChunks,
        sharingPauses: this.model.sharingPauses,
        weightBytes: this.model.weightBytes,
        ...residentMemory(),
        rssBeforeLoad: this.rssBeforeLoad,
        rssAfterLoad: this.rssAfterLoad,
        sequences: this.sequences.size,
        kvBytes,
      },
    ]);
  }
}
