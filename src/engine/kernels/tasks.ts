/**
 * The shared control block of a stage's threads and the jobs written into it. A job is a few
 * tasks (say the q, k and v products of a layer) in one arena; each task is cut into chunks —
 * contiguous ranges of outputs, or of (row, head) pairs — that threads claim one at a time. Each
 * output is computed whole by whichever thread claims its chunk, with the same operations, so
 * neither the number of threads nor who computed what changes a result.
 *
 * A thread the machine deschedules must not hold a job up: workers compute into buffers of their
 * own and publish a finished chunk by compare-and-swap on its state word; the calling thread,
 * once out of chunks to claim, takes over ("steals") any chunk a worker still holds and computes
 * it itself, straight into the output. Whoever loses the race discards its copy, so a late worker
 * never writes where a later job is working. Used by the main thread and every worker
 * (kernel-worker.ts).
 */
import type { KernelExports } from "./kernel-module.js";

/** Int32 slots of the control block's header. */
export const Slot = {
  /** Bumped by the main thread to wake workers for a job. */
  generation: 0,
  /**
   * The tasks' version: 2 × job while they are those of job `job`, odd while the main thread
   * rewrites them. A worker reads a chunk's task between two equal even versions, so it only ever
   * works from one job's consistent tasks (see readChunk).
   */
  tableVersion: 1,
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
  /** Number of the current job (chunk states carry it). */
  job: 9,
  /** Tasks in the current job. */
  taskCount: 10,
  /** Arena of the current job's tasks. */
  arena: 11,
  /** Address of worker 1's private output block in that arena; worker t's is (t - 1) blocks on. */
  privateBase: 12,
  /** Bytes of one worker's private output block. */
  privateStride: 13,
} as const;

const headerWords = 16;
/**
 * The claim word, a 64-bit slot (BigInt64Array index) at the end of the header: job number (32
 * bits) | chunks in the job (16 bits) | next chunk to claim (16 bits). Threads claim chunk i by
 * compare-and-swap from i to i + 1, so a claim only ever succeeds for the job being run, and
 * tells the claimer which job that is.
 */
const claimWordIndex = headerWords / 2 - 1;
/**
 * 32-bit words per task: kind, units, units per chunk, first chunk, output address, output rows,
 * bytes per output row, bytes per unit, offset in a private block, then the arguments.
 */
export const taskWords = 28;
const taskHeaderWords = 9;
/** Tasks one job may hold. */
export const maxTasks = 8;
/** Chunks one job may hold. */
export const maxChunks = 4095;
const stateBase = headerWords + maxTasks * taskWords;
/** Bytes of a control block: header, tasks, and one state word per chunk (a whole number of 64-bit words). */
export const controlBytes = Math.ceil((stateBase + maxChunks) / 2) * 8;

export const TaskKind = { linearF32: 1, linearF16: 2, linearBf16: 3, linearQ4: 4, linearQ8: 5, attention: 6, swiglu: 7 } as const;

/** Chunk states (the low 2 bits of a state word; the rest is the job number). */
export const ChunkState = {
  /** A worker finished it and is copying it out of its private block. */
  publishing: 1,
  /** The main thread took it over. */
  stolen: 2,
  /** Its outputs are in place. */
  complete: 3,
} as const;

/** Views of one control block. */
export interface ControlViews {
  i32: Int32Array;
  u32: Uint32Array;
  f32: Float32Array;
  i64: BigInt64Array;
}

export function controlViews(buffer: SharedArrayBuffer): ControlViews {
  return { i32: new Int32Array(buffer), u32: new Uint32Array(buffer), f32: new Float32Array(buffer), i64: new BigInt64Array(buffer) };
}

/** First word of task `t`. */
export function taskBase(t: number): number {
  return headerWords + t * taskWords;
}

/** Word of argument `i` of the task at `base`. */
export function argWord(base: number, i: number): number {
  return base + taskHeaderWords + i;
}

/** Where a task writes: `rows` rows of `rowBytes` at `out`, unit u of a row at u × `unitBytes`. */
export interface TaskOutput {
  out: number;
  rows: number;
  rowBytes: number;
  unitBytes: number;
}

/** Write task `t`'s header. */
export function writeTaskHeader(
  v: ControlViews,
  t: number,
  kind: number,
  units: number,
  perChunk: number,
  firstChunk: number,
  output: TaskOutput,
  privateOffset: number,
): void {
  const base = taskBase(t);
  const w = v.u32;
  w[base] = kind;
  w[base + 1] = units;
  w[base + 2] = perChunk;
  w[base + 3] = firstChunk;
  w[base + 4] = output.out;
  w[base + 5] = output.rows;
  w[base + 6] = output.rowBytes;
  w[base + 7] = output.unitBytes;
  w[base + 8] = privateOffset;
}

/** Chunks of `units` in pieces of `perChunk`. */
export function chunksOf(units: number, perChunk: number): number {
  return Math.ceil(units / perChunk);
}

/** Open job `job` of `chunks` chunks for claiming. */
export function openJob(v: ControlViews, job: number, chunks: number): void {
  Atomics.store(v.i64, claimWordIndex, (BigInt(job) << 32n) | (BigInt(chunks) << 16n));
}

/**
 * Claim the next chunk of the current job for this thread: job × 65536 + chunk, or -1 when every
 * chunk is claimed (see claimedJob, claimedChunk).
 */
export function claimChunk(v: ControlViews): number {
  for (;;) {
    const word = Atomics.load(v.i64, claimWordIndex);
    const next = Number(word & 0xffffn);
    if (next >= Number((word >> 16n) & 0xffffn)) return -1;
    if (Atomics.compareExchange(v.i64, claimWordIndex, word, word + 1n) === word) return Number(word >> 32n) * 65536 + next;
  }
}

export const claimedJob = (claim: number): number => Math.floor(claim / 65536);
export const claimedChunk = (claim: number): number => claim % 65536;

/** Job numbers count modulo 2^29, so that a state word (job × 4 + state) stays a positive int32. */
export const jobMask = 0x1fffffff;

/** The state word of a chunk of job `job` in state `state`. */
export function stateWord(job: number, state: number): number {
  return (job << 2) | state;
}

/** Whether a state word was written for a job before `job` (up to 2^28 jobs back; numbers wrap). */
export function isBefore(word: number, job: number): boolean {
  const behind = (job - (word >>> 2)) & jobMask;
  return behind > 0 && behind < 0x10000000;
}

export function chunkStateIndex(chunk: number): number {
  return stateBase + chunk;
}

/** One chunk's work, read from the tasks at once: kernels only ever see one job's numbers. */
export interface ChunkWork {
  kind: number;
  arena: number;
  /** Units [s, e). */
  s: number;
  e: number;
  args: number[];
  /** The f32 argument of attention (its scale). */
  scale: number;
  /** Where the task's outputs go, and their geometry (see TaskOutput). */
  out: number;
  rows: number;
  rowBytes: number;
  unitBytes: number;
  /** This thread's private copy of the task's outputs (workers only). */
  privateOut: number;
}

/** Read chunk `chunk`'s work from the tasks as they are now, for thread `thread`. */
export function readChunk(v: ControlViews, chunk: number, thread: number): ChunkWork {
  const w = v.u32;
  const count = v.i32[Slot.taskCount] as number;
  let base = taskBase(0);
  for (let t = 1; t < count && (w[taskBase(t) + 3] as number) <= chunk; t++) base = taskBase(t);
  const perChunk = w[base + 2] as number;
  const s = (chunk - (w[base + 3] as number)) * perChunk;
  return {
    kind: w[base] as number,
    arena: v.i32[Slot.arena] as number,
    s,
    e: Math.max(s, Math.min(s + perChunk, w[base + 1] as number)),
    args: Array.from(w.subarray(base + taskHeaderWords, base + taskWords)),
    scale: v.f32[base + taskHeaderWords + 7] as number,
    out: w[base + 4] as number,
    rows: w[base + 5] as number,
    rowBytes: w[base + 6] as number,
    unitBytes: w[base + 7] as number,
    privateOut: thread === 0 ? 0 : (w[Slot.privateBase] as number) + (thread - 1) * (w[Slot.privateStride] as number) + (w[base + 8] as number),
  };
}

/** Copy a chunk's units from `from` (a private copy of its outputs) to its outputs, in `memory`. */
export function copyUnits(work: ChunkWork, memory: Uint8Array, from: number): void {
  for (let r = 0; r < work.rows; r++) {
    const at = r * work.rowBytes + work.s * work.unitBytes;
    memory.copyWithin(work.out + at, from + at, from + r * work.rowBytes + work.e * work.unitBytes);
  }
}

// Task arguments (u32 words; `units` are outputs for products, rows × heads for attention; each
// task's output address is its header's, passed where the kernel takes it):
//   linearF32:        w x rows in out
//   linearF16/Bf16:   w xp x rows in out panel panelStride rowPtr entries
//   linearQ4/Q8:      w scaleKind scales biases groupSize xp sums rows in out panel panelStride
//   attention:        q keys values start heads kvHeads headDim scale(f32) scores scoresStride
//   swiglu:           gate up (units are elements; the output is gate's address)

/** Run a chunk's work on thread `thread` (its scratch: panel, scores), writing its outputs at `out`. */
export function runWork(kernels: readonly KernelExports[], work: ChunkWork, thread: number, out: number): void {
  const k = kernels[work.arena] as KernelExports;
  const a = (i: number): number => work.args[i] as number;
  const { s, e } = work;
  switch (work.kind) {
    case TaskKind.linearF32:
      k.linearF32(a(0), a(1), out, a(2), a(3), a(4), s, e);
      return;
    case TaskKind.linearF16:
    case TaskKind.linearBf16: {
      const product = work.kind === TaskKind.linearF16 ? k.linearF16 : k.linearBf16;
      product(a(0), a(1), a(2), out, a(3), a(4), a(5), s, e, a(6) + thread * a(7), a(8), a(9));
      return;
    }
    case TaskKind.linearQ4:
    case TaskKind.linearQ8: {
      const product = work.kind === TaskKind.linearQ4 ? k.linearQ4 : k.linearQ8;
      product(a(0), a(1), a(2), a(3), a(4), a(5), a(6), out, a(7), a(8), a(9), s, e, a(10) + thread * a(11));
      return;
    }
    case TaskKind.attention:
      k.attention(a(0), a(1), a(2), out, a(3), a(4), a(5), a(6), work.scale, a(8) + thread * a(9), s, e);
      return;
    case TaskKind.swiglu:
      // `out` is the task's output base (gate's address, or this worker's private copy of it).
      k.swiglu(a(0), a(1), out, s, e);
      return;
    default:
      throw new Error(`unknown kernel task kind ${work.kind}`);
  }
}

/** Run every unit of every task of the job on this thread, straight into the outputs. */
export function runAll(kernels: readonly KernelExports[], v: ControlViews): void {
  const count = v.i32[Slot.taskCount] as number;
  for (let t = 0; t < count; t++) {
    const work = readChunk(v, v.u32[taskBase(t) + 3] as number, 0);
    runWork(kernels, { ...work, s: 0, e: v.u32[taskBase(t) + 1] as number }, 0, work.out);
  }
}
