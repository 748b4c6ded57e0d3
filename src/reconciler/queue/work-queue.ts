/**
 * A keyed work queue in the manner of controller-runtime: an event only enqueues a key; the same
 * key is never processed twice at once; keys added while being processed are processed again
 * afterwards (rapid edits coalesce: the latest state wins because each pass re-reads everything);
 * different keys run in parallel up to `concurrency`. A pass that waits long (a staging, which takes
 * a place of its own among the stagings; a launch, on engines that listen, load or answer) steps
 * aside: it keeps its key but gives its slot back, so slow downloads and passes stuck on hung engines
 * never hold back another cluster's delete, stop or relaunch. Failures back off
 * exponentially per key with jitter; success resets the back-off.
 */

export type PassOutcome =
  /** Converged; nothing to do until the next event or resync. */
  | { kind: "done" }
  /** Expected wait: look again after `afterMs`. */
  | { kind: "requeue"; afterMs: number }
  /** Transient failure: retry with exponential back-off. */
  | { kind: "retry" }
  /** Terminal: stall until an event for this key arrives. */
  | { kind: "stall" };

/** Give the pass's slot back for the rest of the pass (the key stays busy: never two passes of one key). */
export type StepAside = () => void;

export interface WorkQueueOptions {
  /** Keys processed at once, passes that stepped aside not counted. Default 4. */
  concurrency?: number;
  /** First back-off delay, ms. Default 500. */
  baseDelayMs?: number;
  /** Back-off cap, ms. Default 60000. */
  maxDelayMs?: number;
}

export class WorkQueue {
  private readonly dirty = new Set<string>();
  private readonly running = new Set<string>();
  /** Running keys whose pass stepped aside: they hold no slot. */
  private readonly aside = new Set<string>();
  private readonly order: string[] = [];
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly failures = new Map<string, number>();
  private readonly idleWaiters: Array<() => void> = [];
  private stopped = false;
  private readonly concurrency: number;
  private readonly baseDelayMs: number;
  private readonly maxDelayMs: number;

  constructor(
    private readonly process: (key: string, stepAside: StepAside) => Promise<PassOutcome>,
    options: WorkQueueOptions = {},
  ) {
    this.concurrency = options.concurrency ?? 4;
    this.baseDelayMs = options.baseDelayMs ?? 500;
    this.maxDelayMs = options.maxDelayMs ?? 60_000;
  }

  /** Ask for a pass of `key` as soon as possible (cancels any delayed pass). */
  add(key: string): void {
    if (this.stopped) return;
    this.clearTimer(key);
    if (!this.dirty.has(key)) {
      this.dirty.add(key);
      if (!this.running.has(key)) this.order.push(key);
    }
    this.pump();
  }

  /** Ask for a pass of `key` after `delayMs` unless an earlier one is asked for. */
  addAfter(key: string, delayMs: number): void {
    if (this.stopped) return;
    const existing = this.timers.get(key);
    if (existing !== undefined) clearTimeout(existing);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, delayMs);
    timer.unref();
    this.timers.set(key, timer);
  }

  /** Forget a key's back-off (e.g. when its definition changes). */
  forgetFailures(key: string): void {
    this.failures.delete(key);
  }

  /** Resolves when nothing is queued or running (timers aside). */
  whenIdle(): Promise<void> {
    if (this.running.size === 0 && this.order.length === 0) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stop taking work; resolves once the passes in flight end. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    this.order.length = 0;
    this.dirty.clear();
    await this.whenIdle();
  }

  private clearTimer(key: string): void {
    const timer = this.timers.get(key);
    if (timer !== undefined) clearTimeout(timer);
    this.timers.delete(key);
  }

  private pump(): void {
    while (!this.stopped && this.running.size - this.aside.size < this.concurrency) {
      const index = this.order.findIndex((k) => !this.running.has(k));
      if (index < 0) break;
      const [key] = this.order.splice(index, 1);
      if (key === undefined) break;
      this.dirty.delete(key);
      this.running.add(key);
      void this.runPass(key);
    }
    if (this.running.size === 0 && this.order.length === 0) {
      for (const resolve of this.idleWaiters.splice(0)) resolve();
    }
  }

  private async runPass(key: string): Promise<void> {
    let outcome: PassOutcome;
    try {
      outcome = await this.process(key, () => {
        if (!this.running.has(key) || this.aside.has(key)) return;
        this.aside.add(key);
        this.pump();
      });
    } catch {
      outcome = { kind: "retry" };
    }
    this.running.delete(key);
    this.aside.delete(key);
    if (outcome.kind === "retry") {
      const failures = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, failures);
      const delay = Math.min(this.maxDelayMs, this.baseDelayMs * 2 ** (failures - 1));
      // Full jitter in [delay/2, delay): clusters that failed together do not retry in lockstep.
      if (!this.dirty.has(key)) this.addAfter(key, delay / 2 + Math.random() * (delay / 2));
    } else {
      this.failures.delete(key);
      if (outcome.kind === "requeue" && !this.dirty.has(key)) this.addAfter(key, outcome.afterMs);
    }
    if (this.dirty.has(key)) this.order.push(key);
    this.pump();
  }
}
