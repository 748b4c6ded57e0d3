/**
 * The threads of one stage: the calling thread plus `threads - 1` workers, sharing the arenas'
 * memories. A job is published in the control block; the calling thread claims and runs its
 * chunks alongside the workers, waits a moment for theirs, and takes over any a worker still
 * holds (see tasks.ts) — so a product over all threads is one synchronous call, like a product on
 * one, and a worker the machine deschedules costs its chunk's time, not its time slice.
 *
 * Every chunk gives the same bits whichever thread computes it, so when the workers cannot take
 * part — still starting (a worker boots only once the caller's event loop turns: await ready()),
 * or late, the machine being busier than its cores — the caller computes the chunks itself.
 * Whether sharing pays is judged job by job (sharing-judge.ts): on a machine that cannot give the
 * stage its cores, jobs stay on the caller for a while.
 */
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads";
import { builtFile } from "../built-file.js";
import type { Arena } from "./arena.js";
import type { KernelExports } from "./kernel-module.js";
import { SharingJudge } from "./sharing-judge.js";
import type { ThreadSlots } from "./runtime.js";
import {
  argWord,
  ChunkState,
  chunkStateIndex,
  chunksOf,
  claimChunk,
  claimedChunk,
  controlBytes,
  controlViews,
  type ControlViews,
  isBefore,
  jobMask,
  maxChunks,
  maxTasks,
  openJob,
  runAll,
  readChunk,
  runWork,
  Slot,
  stateWord,
  type TaskOutput,
  TaskKind,
  taskBase,
  taskWords,
  writeTaskHeader,
} from "./tasks.js";

/**
 * How long an idle worker spins for the next job before sleeping, ms: long enough to bridge the
 * element-wise steps between the products of a forward pass (tens of microseconds), short enough
 * not to take a busy machine's cores from others between tokens.
 */
const spinMs = 0.2;
/** Chunks per thread a task is cut into: more balance the load, fewer cost less claiming. */
const chunksPerThread = 4;
/**
 * Multiply-adds below which a job runs on the calling thread alone, by default: waking and
 * joining the workers costs microseconds, which a product of 512 × 512 (tens of microseconds)
 * repays and a smaller one does not.
 */
export const minSharedWork = 512 * 512;
/**
 * Once out of chunks to claim, the caller waits this many of its own average chunk times (plus
 * `graceSlackMs`) for the workers' chunks before taking over those still running.
 */
const graceChunks = 1.5;
/** Covers a sleeping worker's wake-up (tens of microseconds). */
const graceSlackMs = 0.1;
/** A worker copying out a published chunk for longer than this has stopped, ms. */
const publishDeadlineMs = 30_000;

/**
 * kernel-worker.js beside this module in the build. Run from source (vitest, tsx) there is only
 * the .ts file, which a worker cannot load, so the build's copy is used.
 */
function workerPath(): string {
  return builtFile(import.meta.url, "./kernel-worker.js");
}

interface PendingTask {
  kind: number;
  units: number;
  /** Multiply-adds, about. */
  work: number;
  output: TaskOutput;
  words: readonly number[];
  floats: ReadonlyArray<[number, number]>;
}

/**
 * Room for the workers' private output blocks: a slot of at least `bytes` per thread in `arena`
 * (worker t uses slot t), whose layout a descheduled worker still writing into its slot after its
 * chunk was taken over cannot break. See KernelRuntime.threadSlots.
 */
export type PrivateSpace = (arena: Arena, bytes: number) => ThreadSlots;

export class ThreadPool {
  private readonly views: ControlViews;
  private readonly workers: Worker[] = [];
  private readonly ports: MessagePort[] = [];
  private readonly kernels: KernelExports[] = [];
  private pending: PendingTask[] = [];
  private pendingArena: Arena | undefined;
  private job = 0;
  private closed = false;
  /** Chunks the caller took over from a worker that was too late with them, since start. */
  stolenChunks = 0;
  /** Whether sharing saves the caller time; jobs stay on the caller while it says not. */
  readonly judge = new SharingJudge();

  constructor(
    /** Threads computing each job, the caller's included (≥ 1). */
    readonly threads: number,
    module: WebAssembly.Module,
    private readonly privateSpace: PrivateSpace,
    /** Multiply-adds below which a job stays on the calling thread. */
    private readonly minWork = minSharedWork,
    /** Whether jobs stay on the caller while the judge says sharing costs it time. */
    private readonly judged = true,
  ) {
    if (!Number.isInteger(threads) || threads < 1) throw new RangeError(`Expected threads to be a positive integer, got ${threads}`);
    this.views = controlViews(new SharedArrayBuffer(controlBytes));
    for (let t = 1; t < threads; t++) {
      const { port1, port2 } = new MessageChannel();
      const worker = new Worker(workerPath(), {
        workerData: { module, control: this.views.i32.buffer, port: port2, thread: t, spinMs },
        transferList: [port2],
        // The worker allocates nearly nothing on its heap: small limits keep its resident memory small.
        resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 32 },
      });
      worker.unref();
      port1.unref();
      this.workers.push(worker);
      this.ports.push(port1);
    }
  }

  /** Resolves once every worker has started (polled: the workers report through shared memory). */
  async ready(): Promise<void> {
    while (!this.workersReady() && !this.closed) await new Promise((resolve) => setTimeout(resolve, 1));
  }

  /** Whether jobs are shared with the workers (false while they start). */
  workersReady(): boolean {
    return Atomics.load(this.views.i32, Slot.ready) === this.workers.length;
  }

  /** Make `arena` usable by tasks (arenas are numbered in the order they are added). */
  addArena(arena: Arena): void {
    if (arena.index !== this.kernels.length) throw new Error(`arena ${arena.index} added out of order`);
    this.kernels.push(arena.kernels);
    for (const port of this.ports) port.postMessage({ memory: arena.memory });
    Atomics.store(this.views.i32, Slot.arenas, this.kernels.length);
  }

  /**
   * Add a task of `kind` to the next job: `units` outputs (or rows × heads for attention), about
   * `work` multiply-adds, computed in `arena` (one arena per job) and written as `output` says;
   * `words` are its u32 arguments and `floats` [index, value] pairs of f32 arguments (see tasks.ts).
   */
  add(kind: number, arena: Arena, units: number, work: number, output: TaskOutput, words: readonly number[], floats: ReadonlyArray<[number, number]> = []): void {
    if (this.pending.length === maxTasks) throw new Error(`a job holds at most ${maxTasks} tasks`);
    if (words.length > taskWords - 9) throw new Error("task arguments overflow the task slot");
    if (this.pendingArena !== undefined && this.pendingArena !== arena) throw new Error("the tasks of one job compute in one arena");
    this.pendingArena = arena;
    this.pending.push({ kind, units, work, output, words, floats });
  }

  /** Run the tasks added since the last run on every thread; returns when all are done. */
  run(): void {
    const tasks = this.pending;
    const arena = this.pendingArena;
    this.pending = [];
    this.pendingArena = undefined;
    if (tasks.length === 0 || arena === undefined) return;
    if (this.closed) throw new Error("the thread pool is closed");
    const work = tasks.reduce((sum, task) => sum + task.work, 0);
    if (this.workers.length === 0 || work < this.minWork || !this.workersReady() || (this.judged && this.judge.paused(performance.now()))) {
      this.write(tasks, arena, false);
      runAll(this.kernels, this.views);
      return;
    }
    const chunks = this.write(tasks, arena, true);
    const i32 = this.views.i32;
    const job = this.job;
    // Claim and run chunks; then give the workers' last chunks a moment; then take over the rest.
    const start = performance.now();
    let own = 0;
    for (let claim = claimChunk(this.views); claim >= 0; claim = claimChunk(this.views)) {
      this.runHere(claimedChunk(claim), job);
      own++;
    }
    const ownDone = performance.now();
    const chunkMs = (ownDone - start) / Math.max(1, own);
    const graceUntil = ownDone + graceSlackMs + graceChunks * chunkMs;
    while (Atomics.load(i32, Slot.completed) < chunks && performance.now() < graceUntil) {
      // Spin: a worker's last chunk is microseconds from done.
    }
    if (Atomics.load(i32, Slot.completed) < chunks) {
      for (let chunk = 0; chunk < chunks; chunk++) {
        const state = chunkStateIndex(chunk);
        const before = Atomics.load(i32, state);
        if (isBefore(before, job) && Atomics.compareExchange(i32, state, before, stateWord(job, ChunkState.stolen)) === before) {
          this.runHere(chunk, job);
          this.stolenChunks++;
        }
      }
      this.waitForPublishing(chunks);
    }
    // Alone, the caller would have computed every chunk at its own pace; shared, it computed its
    // own and then waited for the workers' (and computed those it took over) until now.
    const now = performance.now();
    if (own > 0) this.judge.record((chunks - own) * chunkMs - (now - ownDone), now);
    if (Atomics.load(i32, Slot.failed) !== 0) {
      Atomics.store(i32, Slot.failed, 0);
      throw new Error(`a kernel thread failed: ${this.workerError()}`);
    }
  }

  /** Compute chunk `chunk` on this thread, straight into the outputs, and mark it complete. */
  private runHere(chunk: number, job: number): void {
    const work = readChunk(this.views, chunk, 0);
    runWork(this.kernels, work, 0, work.out);
    Atomics.store(this.views.i32, chunkStateIndex(chunk), stateWord(job, ChunkState.complete));
    Atomics.add(this.views.i32, Slot.completed, 1);
  }

  /**
   * Write the job into the control block; with `share`, cut it into chunks, give the workers room
   * for private copies of the outputs and open it. Returns the chunk count.
   */
  private write(tasks: PendingTask[], arena: Arena, share: boolean): number {
    const v = this.views;
    // Every job gets a new number, shared or not: a worker descheduled since an earlier job reads
    // nothing half-written (the version is odd while rewriting) and no other job's tasks as its own.
    const job = (this.job + 1) & jobMask;
    this.job = job;
    Atomics.store(v.i32, Slot.tableVersion, job * 2 + 1);
    const perTaskLimit = Math.floor(maxChunks / tasks.length);
    let chunks = 0;
    let privateBytes = 0;
    tasks.forEach((task, t) => {
      let perChunk = task.units;
      if (share) {
        // Products split in whole blocks of 4 outputs (the kernels' unit); attention by (row, head).
        const unit = task.kind === TaskKind.attention ? 1 : 4;
        const blocks = Math.ceil(task.units / unit);
        const pieces = Math.min(blocks, this.threads * chunksPerThread, perTaskLimit);
        perChunk = Math.max(1, Math.ceil(blocks / pieces)) * unit;
      }
      writeTaskHeader(v, t, task.kind, task.units, perChunk, chunks, task.output, privateBytes);
      const base = taskBase(t);
      task.words.forEach((word, i) => (v.u32[argWord(base, i)] = word));
      for (const [i, value] of task.floats) v.f32[argWord(base, i)] = value;
      chunks += chunksOf(task.units, perChunk);
      privateBytes += Math.ceil((task.output.rows * task.output.rowBytes) / 64) * 64;
    });
    const i32 = v.i32;
    i32[Slot.taskCount] = tasks.length;
    i32[Slot.arena] = arena.index;
    if (share) {
      const space = this.privateSpace(arena, privateBytes);
      // Worker t's block is slot t; the table counts from worker 1's.
      v.u32[Slot.privateBase] = space.base + space.stride;
      v.u32[Slot.privateStride] = space.stride;
    }
    Atomics.store(i32, Slot.tableVersion, job * 2);
    Atomics.store(i32, Slot.job, job);
    if (!share) return chunks;
    Atomics.store(i32, Slot.completed, 0);
    openJob(v, this.job, chunks);
    Atomics.add(i32, Slot.generation, 1);
    if (Atomics.load(i32, Slot.sleeping) > 0) Atomics.notify(i32, Slot.generation);
    return chunks;
  }

  /** Wait for the chunks workers are copying out of their private blocks (microseconds, unless one was descheduled). */
  private waitForPublishing(chunks: number): void {
    const i32 = this.views.i32;
    const deadline = performance.now() + publishDeadlineMs;
    Atomics.store(i32, Slot.mainWaiting, 1);
    try {
      for (let done = Atomics.load(i32, Slot.completed); done < chunks; done = Atomics.load(i32, Slot.completed)) {
        if (performance.now() > deadline) throw new Error("a kernel thread stopped while publishing its results");
        Atomics.wait(i32, Slot.completed, done, 1);
      }
    } finally {
      Atomics.store(i32, Slot.mainWaiting, 0);
    }
  }

  private workerError(): string {
    for (const port of this.ports) {
      for (let m = receiveMessage(port); m !== undefined; m = receiveMessage(port)) if (typeof m.error === "string") return m.error;
    }
    return "no message";
  }

  /** Stop the workers. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    Atomics.store(this.views.i32, Slot.stop, 1);
    Atomics.add(this.views.i32, Slot.generation, 1);
    Atomics.notify(this.views.i32, Slot.generation);
    await Promise.all(this.workers.map((w) => w.terminate()));
    for (const port of this.ports) port.close();
  }
}

function receiveMessage(port: MessagePort): { error?: unknown } | undefined {
  return (receiveMessageOnPort(port) as { message: { error?: unknown } } | undefined)?.message;
}
