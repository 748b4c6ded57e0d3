/**
 * Heartbeats while the main thread computes. A stage runs its kernels synchronously on the main
 * thread (the kernel workers share the work, the caller waits for them), so during a long prefill
 * its event loop — and the link timers — stop; without help its peers would hear nothing and
 * declare it dead. `run` opens a window around such a computation: a helper thread writes complete
 * heartbeat frames straight to the links' sockets while the window stays open.
 *
 * Opening and closing a window only sets shared words: a decode step computes hundreds of times a
 * second, and waking another thread each time would cost every token two futex wake-ups and
 * context switches. The helper wakes by itself every half `heartbeatMs` and writes when it finds a
 * window open of the same generation as at its last wake; windows opened within one turn of the
 * event loop (many frames handled from one socket read) share a generation, as they are one
 * silence for the links. So the first frame goes out at most one `heartbeatMs` after the loop
 * stopped turning (the links' own timers sent one at most `heartbeatMs` before), then one every
 * half `heartbeatMs` that finds a window open: silence stays under about 2 × `heartbeatMs`, far
 * below the dead bound.
 *
 * The helper vouches for a computation that moves, not for one that hangs: the work reports
 * progress (the model after each layer of each chunk of rows), and once a window has gone
 * `stallMs` without any, the helper stops writing, so a stage stuck inside a computation (a
 * deadlock, a kernel that never returns) falls silent and its peers declare it dead as they would
 * a stopped process. Any progress, or the next window, lets it write again.
 *
 * Safety of writing to a socket the main thread owns: a link takes part only when nothing of its
 * own is queued (every byte the main thread wrote is already in the kernel), so the helper's frames
 * land between whole frames; the main thread cannot write or close anything while it computes; and
 * closing the window waits for a helper write in progress. A short write (the kernel's send buffer
 * had less than a frame of room) is recorded and its tail written by the main thread first thing
 * after the window, so the byte stream stays framed.
 */
import { once } from "node:events";
import { Worker } from "node:worker_threads";
import { encodeFrame, Kind } from "./frames.js";
import { defaultLiveness } from "./liveness.js";
import type { Link } from "./link.js";

/** Links a window can carry (a stage has at most three). */
const maxLinks = 8;

/** Control words (Int32Array indices): `wake` only changes to stop the helper. */
const Slot = { state: 0, generation: 1, count: 2, wake: 3, fds: 4, owed: 4 + maxLinks, progress: 4 + 2 * maxLinks } as const;
/** Values of Slot.state. */
const State = { idle: 0, open: 1, writing: 2 } as const;

const heartbeatFrame = encodeFrame(Kind.Heartbeat, Buffer.alloc(0));

/** Longest a window may go without progress before the helper stops heartbeating for it, ms. */
export const defaultComputeStallMs = 30_000;

/**
 * The helper thread (CommonJS, evaluated): wakes every half heartbeatMs and writes a frame to every
 * link of a window it finds open since its last wake (the same generation, still open), unless the
 * computation made no progress for stallMs.
 */
const helperSource = `
const { workerData } = require("node:worker_threads");
const { writeSync } = require("node:fs");
const c = new Int32Array(workerData.control);
const frame = Buffer.from(workerData.frame);
const periodMs = Math.max(1, Math.floor(workerData.heartbeatMs / 2));
const stallMs = workerData.stallMs;
let seen = -1;
let seenProgress = -1;
let movedAt = 0;
for (;;) {
  Atomics.wait(c, ${Slot.wake}, 0, periodMs);
  if (Atomics.load(c, ${Slot.wake}) !== 0) break;
  const generation = Atomics.load(c, ${Slot.generation});
  const progress = Atomics.load(c, ${Slot.progress});
  const now = performance.now();
  if (generation !== seen || progress !== seenProgress) movedAt = now;
  const longOpen = generation === seen;
  seen = generation;
  seenProgress = progress;
  if (!longOpen) continue;
  // A computation that stopped moving is not vouched for: the links fall silent.
  if (now - movedAt > stallMs) continue;
  if (Atomics.compareExchange(c, ${Slot.state}, ${State.open}, ${State.writing}) !== ${State.open}) continue;
  const count = Atomics.load(c, ${Slot.count});
  for (let i = 0; i < count; i++) {
    if (Atomics.load(c, ${Slot.owed} + i) !== 0) continue;
    let written = 0;
    try {
      written = writeSync(Atomics.load(c, ${Slot.fds} + i), frame);
    } catch {
      // EAGAIN (send buffer full) or a peer reset: nothing written, the main thread sees the rest.
    }
    if (written > 0 && written < frame.length) Atomics.store(c, ${Slot.owed} + i, frame.length - written);
  }
  Atomics.store(c, ${Slot.state}, ${State.open});
}
`;

export class ComputeHeartbeat {
  private readonly control = new Int32Array(new SharedArrayBuffer(4 * (Slot.progress + 1)));
  private worker: Worker | undefined;
  private window: Link[] = [];
  /** Whether this turn of the event loop already began a generation of windows. */
  private generationThisTurn = false;

  /** `stallMs`: how long a window may go without progress before the helper stops heartbeating for it. */
  constructor(
    private readonly heartbeatMs = defaultLiveness.heartbeatMs,
    private readonly stallMs = defaultComputeStallMs,
  ) {}

  /**
   * Start the helper thread now rather than at the first long compute: it is part of the idle
   * runtime (a small isolate), like the kernel threads, and a stage starts it before its weights.
   */
  async start(): Promise<void> {
    if (this.worker !== undefined) return;
    const worker = (this.worker = this.startHelper());
    // Held while it comes up: nothing else may keep the process alive yet.
    worker.ref();
    await once(worker, "online");
    worker.unref();
  }

  /**
   * Run `work` (synchronous, possibly long) while the helper thread keeps `links` heartbeating.
   * `work` calls `progress` as it moves (cheap: one atomic add); a window that goes `stallMs`
   * without it is heartbeated no more.
   */
  run<T>(links: ReadonlyArray<Link | undefined>, work: (progress: () => void) => T): T {
    const shared = this.open(links);
    if (shared === 0) return work(noProgress);
    try {
      return work(this.progress);
    } finally {
      this.close();
    }
  }

  /** Stop the helper thread. */
  stop(): void {
    Atomics.store(this.control, Slot.wake, 1);
    Atomics.notify(this.control, Slot.wake);
    this.worker = undefined;
  }

  private readonly progress = (): void => {
    Atomics.add(this.control, Slot.progress, 1);
  };

  private open(links: ReadonlyArray<Link | undefined>): number {
    const c = this.control;
    this.window = [];
    for (const link of links) {
      const fd = link?.shareableFd() ?? -1;
      if (link === undefined || fd < 0 || this.window.length >= maxLinks) continue;
      Atomics.store(c, Slot.fds + this.window.length, fd);
      Atomics.store(c, Slot.owed + this.window.length, 0);
      this.window.push(link);
    }
    if (this.window.length === 0) return 0;
    this.worker ??= this.startHelper();
    Atomics.store(c, Slot.count, this.window.length);
    // A new generation once per turn of the event loop: windows opened back to back without one
    // (many frames handled from one socket read) are one long silence for the links, and the
    // helper must see them as one window.
    if (!this.generationThisTurn) {
      Atomics.add(c, Slot.generation, 1);
      this.generationThisTurn = true;
      setImmediate(() => (this.generationThisTurn = false));
    }
    Atomics.store(c, Slot.state, State.open);
    return this.window.length;
  }

  private close(): void {
    const c = this.control;
    // A helper write in progress lasts microseconds: wait for it.
    while (Atomics.compareExchange(c, Slot.state, State.open, State.idle) === State.writing);
    this.window.forEach((link, i) => {
      const owed = Atomics.load(c, Slot.owed + i);
      if (owed > 0) link.writeRaw(heartbeatFrame.subarray(heartbeatFrame.length - owed));
    });
    this.window = [];
  }

  private startHelper(): Worker {
    const worker = new Worker(helperSource, {
      eval: true,
      workerData: { control: this.control.buffer, frame: heartbeatFrame, heartbeatMs: this.heartbeatMs, stallMs: this.stallMs },
      resourceLimits: { maxYoungGenerationSizeMb: 1, maxOldGenerationSizeMb: 16 },
    });
    worker.unref();
    return worker;
  }
}

function noProgress(): void {}
