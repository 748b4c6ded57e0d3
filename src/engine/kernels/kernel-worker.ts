/**
 * A kernel thread: waits for a job in the control block, claims and runs its chunks until none is
 * left, then waits again. A chunk is computed into this thread's private block and published by
 * compare-and-swap on its state word; if the main thread took it over meanwhile (this thread was
 * descheduled), the copy is dropped (see tasks.ts). After a job it took part in, the thread spins
 * for a moment (the next one usually follows within microseconds, and a futex wake-up costs tens
 * of them), then sleeps in Atomics.wait; after a job it came too late for it sleeps at once,
 * leaving the core to others. Never touches the event loop: new arenas arrive on a message port
 * it reads synchronously.
 */
import { receiveMessageOnPort, workerData, type MessagePort } from "node:worker_threads";
import { instantiateKernels, type KernelExports } from "./kernel-module.js";
import { ChunkState, chunkStateIndex, claimChunk, claimedChunk, claimedJob, controlViews, copyUnits, isBefore, readChunk, runWork, Slot, stateWord } from "./tasks.js";

interface KernelWorkerData {
  module: WebAssembly.Module;
  control: SharedArrayBuffer;
  port: MessagePort;
  thread: number;
  /** How long to spin for the next job before sleeping, ms. */
  spinMs: number;
}

const { module, control, port, thread, spinMs } = workerData as KernelWorkerData;
const views = controlViews(control);
const i32 = views.i32;
const kernels: KernelExports[] = [];
const memories: WebAssembly.Memory[] = [];
let seen = Atomics.load(i32, Slot.generation);
Atomics.add(i32, Slot.ready, 1);
/** Whether the last job had chunks left for this thread. */
let tookPart = true;

/** Attach the arenas published so far. */
function attachArenas(): void {
  while (kernels.length < Atomics.load(i32, Slot.arenas)) {
    const received = receiveMessageOnPort(port) as { message: { memory: WebAssembly.Memory } } | undefined;
    if (received === undefined) throw new Error("an arena was announced but not sent");
    memories.push(received.message.memory);
    kernels.push(instantiateKernels(module, received.message.memory));
  }
}

/**
 * Compute claimed chunk `chunk` of job `job` privately and publish it, unless the main thread
 * took it over meanwhile (this thread was descheduled): then its tasks may already be a later
 * job's, and nothing is computed or written outside this thread's own scratch.
 */
function runClaimed(chunk: number, job: number): void {
  const state = chunkStateIndex(chunk);
  const before = Atomics.load(i32, state);
  if (!isBefore(before, job)) return;
  const version = Atomics.load(i32, Slot.tableVersion);
  if (version !== job * 2) return;
  const work = readChunk(views, chunk, thread);
  if (Atomics.load(i32, Slot.tableVersion) !== version) return;
  runWork(kernels, work, thread, work.privateOut);
  if (Atomics.compareExchange(i32, state, before, stateWord(job, ChunkState.publishing)) !== before) return;
  copyUnits(work, new Uint8Array((memories[work.arena] as WebAssembly.Memory).buffer), work.privateOut);
  Atomics.store(i32, state, stateWord(job, ChunkState.complete));
  Atomics.add(i32, Slot.completed, 1);
  if (Atomics.load(i32, Slot.mainWaiting) !== 0) Atomics.notify(i32, Slot.completed);
}

for (;;) {
  let spins = 0;
  let spinUntil = performance.now() + (tookPart ? spinMs : 0);
  while (Atomics.load(i32, Slot.generation) === seen) {
    if ((++spins & 255) !== 0 || performance.now() < spinUntil) continue;
    Atomics.add(i32, Slot.sleeping, 1);
    Atomics.wait(i32, Slot.generation, seen);
    Atomics.sub(i32, Slot.sleeping, 1);
    spinUntil = performance.now() + spinMs;
  }
  seen = Atomics.load(i32, Slot.generation);
  if (Atomics.load(i32, Slot.stop) !== 0) break;
  tookPart = false;
  for (let claim = claimChunk(views); claim >= 0; claim = claimChunk(views)) {
    tookPart = true;
    try {
      attachArenas();
      runClaimed(claimedChunk(claim), claimedJob(claim));
    } catch (error) {
      // Publish nothing: the main thread takes the chunk over, then fails the job with this message.
      Atomics.store(i32, Slot.failed, 1);
      port.postMessage({ error: (error as Error).message });
    }
  }
}
port.close();
