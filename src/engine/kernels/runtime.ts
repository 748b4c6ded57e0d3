/**
 * A stage's compute runtime: its arenas (weights, caches and scratch in shared WebAssembly
 * memory), its thread pool, and named scratch buffers that grow on demand.
 */
import { Arena } from "./arena.js";
import { kernelModule } from "./kernel-module.js";
import { minSharedWork, ThreadPool } from "./thread-pool.js";

export interface RuntimeOptions {
  /** Threads computing each product, the caller's included. Default 1. */
  threads?: number;
  /**
   * Weight bytes one arena takes before the next is opened. Default 3 GiB: the rest of an arena's
   * 4 GiB address space is left to the home arena's caches and scratch.
   */
  arenaWeightBytes?: number;
  /** Multiply-adds below which a job stays on the calling thread. Default 512 × 512. */
  minSharedWork?: number;
  /** Whether jobs stay on the caller while sharing costs it time (see sharing-judge.ts). Default true. */
  judgeSharing?: boolean;
}

/** Bytes of weights an arena takes by default. */
const defaultArenaWeightBytes = 3 * 1024 ** 3;

export class KernelRuntime {
  readonly arenas: Arena[] = [];
  readonly pool: ThreadPool;
  private readonly module: WebAssembly.Module;
  private readonly arenaWeightBytes: number;
  /** Weight bytes placed in each arena. */
  private readonly placed: number[] = [];
  private readonly buffers = new Map<string, { ptr: number; bytes: number }>();
  private readonly threadSlotBlocks = new Map<string, ThreadSlots>();

  constructor(options: RuntimeOptions = {}) {
    this.module = kernelModule();
    this.arenaWeightBytes = options.arenaWeightBytes ?? defaultArenaWeightBytes;
    this.pool = new ThreadPool(
      options.threads ?? 1,
      this.module,
      (arena, bytes) => this.threadSlots(arena, "worker-outputs", bytes),
      options.minSharedWork ?? minSharedWork,
      options.judgeSharing ?? true,
    );
    this.addArena();
  }

  get threads(): number {
    return this.pool.threads;
  }

  /** Resolves once every kernel thread has started (until then the caller computes every share). */
  ready(): Promise<void> {
    return this.pool.ready();
  }

  /** The arena of activations, caches and scratch (also the first arena of weights). */
  get home(): Arena {
    return this.arenas[0] as Arena;
  }

  private addArena(): Arena {
    const arena = new Arena(this.arenas.length, this.module);
    this.arenas.push(arena);
    this.placed.push(0);
    this.pool.addArena(arena);
    return arena;
  }

  /** Room for `bytes` of weights: in the newest arena while it has budget left, else in a new one. */
  placeWeights(bytes: number): { arena: Arena; ptr: number } {
    const footprint = Arena.footprint(bytes);
    let index = this.arenas.length - 1;
    if ((this.placed[index] as number) > 0 && (this.placed[index] as number) + footprint > this.arenaWeightBytes) index = this.addArena().index;
    const arena = this.arenas[index] as Arena;
    this.placed[index] = (this.placed[index] as number) + footprint;
    return { arena, ptr: arena.alloc(bytes) };
  }

  /**
   * Per-thread scratch `name` in `arena` (panels, attention scores, workers' private outputs):
   * one slot of at least `bytesPerThread` for each thread, thread t's at base + t × stride. A
   * worker descheduled mid-chunk, whose chunk the caller took over, may still be writing into its
   * slot while later jobs run, laid out for its old job. So a block's stride never changes — a
   * late write stays inside the late thread's own slot, which no other thread uses — and a block
   * outgrown is never reused: the next has a new address and twice the stride, so what is left
   * behind stays under the size of the newest.
   */
  threadSlots(arena: Arena, name: string, bytesPerThread: number): ThreadSlots {
    const key = `${arena.index}:${name}`;
    const have = this.threadSlotBlocks.get(key);
    if (have !== undefined && have.stride >= bytesPerThread) return have;
    const stride = Math.max(Math.ceil(bytesPerThread / 64) * 64, 2 * (have?.stride ?? 0));
    const slots = { base: arena.alloc(stride * this.threads), stride };
    this.threadSlotBlocks.set(key, slots);
    return slots;
  }

  /** Scratch buffer `name` of at least `bytes` in `arena` (its contents are lost when it grows). */
  buffer(arena: Arena, name: string, bytes: number): number {
    const key = `${arena.index}:${name}`;
    const have = this.buffers.get(key);
    if (have !== undefined && have.bytes >= bytes) return have.ptr;
    if (have !== undefined) arena.release(have.ptr, have.bytes);
    const ptr = arena.alloc(bytes);
    this.buffers.set(key, { ptr, bytes });
    return ptr;
  }

  async close(): Promise<void> {
    await this.pool.close();
  }
}

/** A block of per-thread scratch: thread t's slot is at base + t × stride (bytes). */
export interface ThreadSlots {
  base: number;
  stride: number;
}
