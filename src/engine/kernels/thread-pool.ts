/**
 * The threads of one stage: the calling thread plus `threads - 1` workers, sharing the arenas'
 * memories. A job is published in the control block and the calling thread claims and runs its
 * chunks alongside the workers, then waits for the chunks still running elsewhere — so a product
 * over all threads is one synchronous call, like a product on one.
 *
 * Every chunk gives the same bits whichever thread computes it, so when the workers cannot take
 * part — still starting (a worker boots only once the caller's event loop turns: await ready()),
 * late because the machine is busier than its cores (a descheduled worker holds its chunk for a
 * whole time slice, milliseconds, and every product waits for it), or stopped — the caller
 * computes the chunks itself.
 */
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { MessageChannel, type MessagePort, receiveMessageOnPort, Worker } from "node:worker_threads";
import type { Arena } from "./arena.js";
import type { KernelExports } from "./kernel-module.js";
import {
  argWord,
  chunkDone,
  chunksOf,
  claimChunk,
  claimWord,
  completeChunk,
  controlBytes,
  controlViews,
  type ControlViews,
  maxChunks,
  maxTasks,
  runChunk,
  runUnits,
  Slot,
  TaskKind,
  taskBase,
  taskWords,
  writeTaskHeader,
} from "./tasks.js";

/** How long an idle worker spins for the next job before sleeping, ms. */
const spinMs = 2;
/**
 * How long the caller spins for chunks running on other threads before sleeping, ms: short,
 * since a chunk takes microseconds and a long wait means the machine descheduled its thread —
 * which then needs a core, perhaps this one.
 */
const waitSpinMs = 0.2;
/** How long the caller waits for chunks claimed elsewhere before computing them itself, ms. */
const unresponsiveMs = 30_000;
/** Chunks per thread a task is cut into: more balance the load, fewer cost less claiming. */
const chunksPerThread = 4;
/**
 * A job whose caller waited longer than this for other threads' chunks found a worker
 * descheduled, ms (a chunk itself takes microseconds). Jobs then stay on the caller for a pause
 * that doubles with each late job (from minPauseMs to maxPauseMs) and halves with each prompt one.
 */
const lateWaitMs = 1;
const minPauseMs = 50;
const maxPauseMs = 2000;

/**
 * kernel-worker.js beside this module in the build. Run from source (vitest, tsx) there is only
 * the .ts file, which a worker cannot load, so the build's copy is used.
 */
function workerPath(): string {
  const beside = fileURLToPath(new URL("./kernel-worker.js", import.meta.url));
  if (existsSync(beside) || !import.meta.url.endsWith(".ts")) return beside;
  return fileURLToPath(new URL("../../../dist/src/engine/kernels/kernel-worker.js", import.meta.url));
}

interface PendingTask {
  kind: number;
  arena: number;
  units: number;
  words: readonly number[];
  floats: ReadonlyArray<[number, number]>;
}

export class ThreadPool {
  private readonly views: ControlViews;
  private readonly workers: Worker[] = [];
  private readonly ports: MessagePort[] = [];
  private readonly kernels: KernelExports[] = [];
  private pending: PendingTask[] = [];
  private job = 0;
  private closed = false;
  /** Set when a worker stopped answering: the caller computes every chunk from then on. */
  private degraded = false;
  /** Jobs stay on the caller until this time (performance.now(), ms), after late workers. */
  private pausedUntil = 0;
  private pauseMs = 0;

  constructor(
    /** Threads computing each job, the caller's included (≥ 1). */
    readonly threads: number,
    module: WebAssembly.Module,
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

  /** Whether jobs are shared with the workers (false while they start, or after one stopped answering). */
  workersReady(): boolean {
    return !this.degraded && Atomics.load(this.views.i32, Slot.ready) === this.workers.length;
  }

  /** Make `arena` usable by tasks (arenas are numbered in the order they are added). */
  addArena(arena: Arena): void {
    if (arena.index !== this.kernels.length) throw new Error(`arena ${arena.index} added out of order`);
    this.kernels.push(arena.kernels);
    for (const port of this.ports) port.postMessage({ memory: arena.memory });
    Atomics.store(this.views.i32, Slot.arenas, this.kernels.length);
  }

  /**
   * Add a task of `kind` to the next job: `units` outputs (or rows × heads for attention)
   * computed in arena `arena`; `words` are its u32 arguments and `floats` [index, value] pairs of
   * f32 arguments (see tasks.ts).
   */
  add(kind: number, arena: number, units: number, words: readonly number[], floats: ReadonlyArray<[number, number]> = []): void {
    if (this.pending.length === maxTasks) throw new Error(`a job holds at most ${maxTasks} tasks`);
    if (words.length > taskWords - 5) throw new Error("task arguments overflow the task slot");
    this.pending.push({ kind, arena, units, words, floats });
  }

  /** Run the tasks added since the last run on every thread; returns when all are done. */
  run(): void {
    const tasks = this.pending;
    this.pending = [];
    if (tasks.length === 0) return;
    if (this.closed) throw new Error("the thread pool is closed");
    const share = this.workers.length > 0 && this.workersReady() && performance.now() >= this.pausedUntil;
    const chunks = this.publish(tasks, share);
    if (!share) {
      // One chunk per task, all on this thread.
      for (let t = 0; t < tasks.length; t++) runUnits(this.kernels, this.views, taskBase(t), 0, (tasks[t] as PendingTask).units, 0);
      return;
    }
    const i32 = this.views.i32;
    for (let chunk = claimChunk(i32); chunk >= 0; chunk = claimChunk(i32)) {
      runChunk(this.kernels, this.views, chunk, 0);
      completeChunk(i32, chunk, this.job);
    }
    const waitStart = performance.now();
    const finished = this.waitForChunks(chunks);
    const waited = performance.now() - waitStart;
    if (waited > lateWaitMs) {
      this.pauseMs = Math.min(maxPauseMs, Math.max(minPauseMs, this.pauseMs * 2));
      this.pausedUntil = performance.now() + this.pauseMs;
    } else this.pauseMs /= 2;
    if (!finished) {
      // A worker stopped answering mid-chunk: stop the workers (one that resumed later would
      // write into buffers the next jobs reuse), compute what is not done here, and keep every
      // later job on this thread.
      this.degraded = true;
      for (const worker of this.workers) void worker.terminate();
      for (let chunk = 0; chunk < chunks; chunk++) if (!chunkDone(i32, chunk, this.job)) runChunk(this.kernels, this.views, chunk, 0);
    }
    if (Atomics.load(i32, Slot.failed) !== 0) throw new Error(`a kernel thread failed: ${this.workerError()}`);
  }

  /** Write the job into the control block; with `share`, cut it into chunks and wake the workers. Returns the chunk count. */
  private publish(tasks: PendingTask[], share: boolean): number {
    const v = this.views;
    const perTaskLimit = Math.floor(maxChunks / tasks.length);
    let chunks = 0;
    tasks.forEach((task, t) => {
      let perChunk = task.units;
      if (share) {
        // Products split in whole blocks of 4 outputs (the kernels' unit); attention by (row, head).
        const unit = task.kind === TaskKind.attention ? 1 : 4;
        const blocks = Math.ceil(task.units / unit);
        const pieces = Math.min(blocks, this.threads * chunksPerThread, perTaskLimit);
        perChunk = Math.max(1, Math.ceil(blocks / pieces)) * unit;
      }
      writeTaskHeader(v, t, task.kind, task.arena, task.units, perChunk, chunks);
      const base = taskBase(t);
      task.words.forEach((word, i) => (v.u32[argWord(base, i)] = word));
      for (const [i, value] of task.floats) v.f32[argWord(base, i)] = value;
      chunks += chunksOf(task.units, perChunk);
    });
    const i32 = v.i32;
    i32[Slot.taskCount] = tasks.length;
    if (!share) return chunks;
    this.job = (this.job + 1) | 0;
    Atomics.store(i32, Slot.job, this.job);
    Atomics.store(i32, Slot.completed, 0);
    Atomics.store(i32, Slot.failed, 0);
    Atomics.store(i32, Slot.claim, claimWord(this.job, chunks, 0));
    Atomics.add(i32, Slot.generation, 1);
    if (Atomics.load(i32, Slot.sleeping) > 0) Atomics.notify(i32, Slot.generation);
    return chunks;
  }

  /** Wait until every chunk is complete; false if one claimed elsewhere stays running for unresponsiveMs. */
  private waitForChunks(chunks: number): boolean {
    const i32 = this.views.i32;
    const spinUntil = performance.now() + waitSpinMs;
    let spins = 0;
    while (Atomics.load(i32, Slot.completed) < chunks) {
      if ((++spins & 255) !== 0 || performance.now() < spinUntil) continue;
      // A worker was descheduled mid-chunk: sleep until it reports, yielding the core to it.
      const deadline = performance.now() + unresponsiveMs;
      Atomics.store(i32, Slot.mainWaiting, 1);
      for (let done = Atomics.load(i32, Slot.completed); done < chunks; done = Atomics.load(i32, Slot.completed)) {
        if (performance.now() > deadline) break;
        Atomics.wait(i32, Slot.completed, done, 10);
      }
      Atomics.store(i32, Slot.mainWaiting, 0);
      return Atomics.load(i32, Slot.completed) >= chunks;
    }
    return true;
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
