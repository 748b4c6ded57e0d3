/**
 * The shared control block of a stage's threads and the jobs written into it. A job is a few
 * tasks (say the q, k and v products of a layer); each task is cut into chunks — contiguous
 * ranges of outputs, or of (row, head) pairs — that threads claim one at a time, so a thread the
 * machine deschedules delays a job by one chunk, not by its whole share. Each output is computed
 * whole by whichever thread claims its chunk, with the same operations, so neither the number of
 * threads nor who computed what changes a result. Used by the main thread and every worker
 * (kernel-worker.ts).
 */
import type { KernelExports } from "./kernel-module.js";

/** Int32 slots of the control block's header. */
export const Slot = {
  /** Bumped by the main thread to wake workers for a job. */
  generation: 0,
  /**
   * The claim word: job tag (8 bits) | chunks in the job (12 bits) | next chunk to claim (12
   * bits). Threads claim chunk i by compare-and-swap from i to i + 1, so a claim can only ever
   * succeed for the job being run.
   */
  claim: 1,
  /** Chunks of the current job completed. */
  completed: 2,
  /** Workers blocked in Atomics.wait (the main thread notifies only when there are some). */
  sleeping: 3,
  /** Non-zero: workers exit. */
  stop: 4,
  /** Arenas published so far (a worker instantiates the kernels for each new one before working). */
  arenas: 5,
  /** Non-zero while the main thread sleeps waiting for `completed`. */
  mainWaiting: 6,
  /** Non-zero when a chunk of the current job failed. */
  failed: 7,
  /** Workers that have started and wait for jobs. */
  ready: 8,
  /** Number of the current job (the done marks below carry it). */
  job: 9,
  /** Tasks in the current job. */
  taskCount: 10,
} as const;

const headerWords = 16;
/** 32-bit words per task: kind, arena, units, units per chunk, first chunk, then arguments. */
export const taskWords = 24;
const taskHeaderWords = 5;
/** Tasks one job may hold. */
export const maxTasks = 8;
/** Chunks one job may hold (12 bits of the claim word). */
export const maxChunks = 4095;
const doneBase = headerWords + maxTasks * taskWords;
/** Bytes of a control block: header, tasks, and one done mark per chunk. */
export const controlBytes = (doneBase + maxChunks) * 4;

export const TaskKind = { linearF32: 1, linearF16: 2, linearBf16: 3, linearQ4: 4, linearQ8: 5, attention: 6 } as const;

/** Views of one control block. */
export interface ControlViews {
  i32: Int32Array;
  u32: Uint32Array;
  f32: Float32Array;
}

export function controlViews(buffer: SharedArrayBuffer): ControlViews {
  return { i32: new Int32Array(buffer), u32: new Uint32Array(buffer), f32: new Float32Array(buffer) };
}

/** First word of task `t`. */
export function taskBase(t: number): number {
  return headerWords + t * taskWords;
}

/** Word of argument `i` of the task at `base`. */
export function argWord(base: number, i: number): number {
  return base + taskHeaderWords + i;
}

/** Write task `t`'s header: its kind, arena, and its `units` cut into chunks of `perChunk`. */
export function writeTaskHeader(v: ControlViews, t: number, kind: number, arena: number, units: number, perChunk: number, firstChunk: number): void {
  const base = taskBase(t);
  v.u32[base] = kind;
  v.u32[base + 1] = arena;
  v.u32[base + 2] = units;
  v.u32[base + 3] = perChunk;
  v.u32[base + 4] = firstChunk;
}

/** Chunks of `units` in pieces of `perChunk`. */
export function chunksOf(units: number, perChunk: number): number {
  return Math.ceil(units / perChunk);
}

/** The claim word of a job. */
export function claimWord(job: number, chunks: number, next: number): number {
  return ((job & 0xff) << 24) | (chunks << 12) | next | 0;
}

/**
 * Claim the next chunk of the current job for this thread: its index, or -1 when every chunk is
 * claimed.
 */
export function claimChunk(i32: Int32Array): number {
  for (;;) {
    const word = Atomics.load(i32, Slot.claim);
    const next = word & 0xfff;
    if (next >= ((word >>> 12) & 0xfff)) return -1;
    if (Atomics.compareExchange(i32, Slot.claim, word, word + 1) === word) return next;
  }
}

/** Mark chunk `chunk` of job `job` done and count it. */
export function completeChunk(i32: Int32Array, chunk: number, job: number): void {
  Atomics.store(i32, doneBase + chunk, job);
  Atomics.add(i32, Slot.completed, 1);
}

/** Whether chunk `chunk` of job `job` is done. */
export function chunkDone(i32: Int32Array, chunk: number, job: number): boolean {
  return Atomics.load(i32, doneBase + chunk) === job;
}

// Task arguments (u32 words; `units` are outputs for products, rows × heads for attention):
//   linearF32:        w x y rows in out
//   linearF16/Bf16:   w xp x y rows in out panel panelStride rowPtr entries
//   linearQ4/Q8:      w scaleKind scales biases groupSize xp sums y rows in out panel panelStride
//   attention:        q keys values out start heads kvHeads headDim scale(f32) scores scoresStride

/** Run chunk `chunk` of the current job on thread `thread` (its scratch: panel, scores). */
export function runChunk(kernels: readonly KernelExports[], v: ControlViews, chunk: number, thread: number): void {
  const w = v.u32;
  const count = v.i32[Slot.taskCount] as number;
  let base = taskBase(0);
  for (let t = 1; t < count && (w[taskBase(t) + 4] as number) <= chunk; t++) base = taskBase(t);
  const perChunk = w[base + 3] as number;
  const s = (chunk - (w[base + 4] as number)) * perChunk;
  const e = Math.min(s + perChunk, w[base + 2] as number);
  runUnits(kernels, v, base, s, e, thread);
}

/** Run units [s, e) of the task at `base` on thread `thread`. */
export function runUnits(kernels: readonly KernelExports[], v: ControlViews, base: number, s: number, e: number, thread: number): void {
  const w = v.u32;
  const k = kernels[w[base + 1] as number] as KernelExports;
  const a = (i: number): number => w[base + taskHeaderWords + i] as number;
  switch (w[base]) {
    case TaskKind.linearF32:
      k.linearF32(a(0), a(1), a(2), a(3), a(4), a(5), s, e);
      return;
    case TaskKind.linearF16:
    case TaskKind.linearBf16: {
      const product = w[base] === TaskKind.linearF16 ? k.linearF16 : k.linearBf16;
      product(a(0), a(1), a(2), a(3), a(4), a(5), a(6), s, e, a(7) + thread * a(8), a(9), a(10));
      return;
    }
    case TaskKind.linearQ4:
    case TaskKind.linearQ8: {
      const product = w[base] === TaskKind.linearQ4 ? k.linearQ4 : k.linearQ8;
      product(a(0), a(1), a(2), a(3), a(4), a(5), a(6), a(7), a(8), a(9), a(10), s, e, a(11) + thread * a(12));
      return;
    }
    case TaskKind.attention:
      k.attention(a(0), a(1), a(2), a(3), a(4), a(5), a(6), a(7), v.f32[base + taskHeaderWords + 8] as number, a(9) + thread * a(10), s, e);
      return;
    default:
      throw new Error(`unknown kernel task kind ${w[base]}`);
  }
}
