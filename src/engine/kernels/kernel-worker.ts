/**
 * A kernel thread: waits for a job in the control block, claims and runs its chunks until none is
 * left, then waits again. It spins for a moment after each job (the next one usually follows
 * within microseconds, and a futex wake-up costs tens of them), then sleeps in Atomics.wait.
 * Never touches the event loop: new arenas arrive on a message port it reads synchronously.
 */
import { receiveMessageOnPort, workerData, type MessagePort } from "node:worker_threads";
import { instantiateKernels, type KernelExports } from "./kernel-module.js";
import { claimChunk, completeChunk, controlViews, runChunk, Slot } from "./tasks.js";

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
let seen = Atomics.load(i32, Slot.generation);
Atomics.add(i32, Slot.ready, 1);

for (;;) {
  let spins = 0;
  let spinUntil = performance.now() + spinMs;
  while (Atomics.load(i32, Slot.generation) === seen) {
    if ((++spins & 255) !== 0 || performance.now() < spinUntil) continue;
    Atomics.add(i32, Slot.sleeping, 1);
    Atomics.wait(i32, Slot.generation, seen);
    Atomics.sub(i32, Slot.sleeping, 1);
    spinUntil = performance.now() + spinMs;
  }
  seen = Atomics.load(i32, Slot.generation);
  if (Atomics.load(i32, Slot.stop) !== 0) break;
  for (let chunk = claimChunk(i32); chunk >= 0; chunk = claimChunk(i32)) {
    // The job cannot change before this chunk completes: its number and tasks are current.
    const job = Atomics.load(i32, Slot.job);
    try {
      while (kernels.length < Atomics.load(i32, Slot.arenas)) {
        const received = receiveMessageOnPort(port) as { message: { memory: WebAssembly.Memory } } | undefined;
        if (received === undefined) throw new Error("an arena was announced but not sent");
        kernels.push(instantiateKernels(module, received.message.memory));
      }
      runChunk(kernels, views, chunk, thread);
    } catch (error) {
      Atomics.store(i32, Slot.failed, 1);
      port.postMessage({ error: (error as Error).message });
    }
    completeChunk(i32, chunk, job);
    if (Atomics.load(i32, Slot.mainWaiting) !== 0) Atomics.notify(i32, Slot.completed);
  }
}
port.close();
