/**
 * Admission: at most `limit` sequences generate at once, as many as the KV caches were planned
 * for (`--max-sequences`, the definition's `max_sequences`). The rest wait in arrival order; one
 * whose client goes away while it waits leaves the queue without ever being computed. Without the
 * limit every request would be sent to the first stage at once: each takes a KV cache (memory
 * grows past the plan), and a stage works through its frames in arrival order, so the release of
 * an abandoned request would queue behind everything sent before it.
 */
export class SequenceSlots {
  private active = 0;
  private readonly waiting: Array<{ grant: () => void }> = [];

  constructor(readonly limit: number) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`Expected a positive integer limit, got ${limit}`);
  }

  /** Sequences generating now. */
  get running(): number {
    return this.active;
  }

  /** Requests waiting for a slot. */
  get queued(): number {
    return this.waiting.length;
  }

  /**
   * A slot, once one is free; resolves with its release (call it once). Rejects with `signal`'s
   * reason when the signal aborts first: the request then never takes a slot.
   */
  acquire(signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted();
    if (this.active < this.limit) {
      this.active++;
      return Promise.resolve(this.releaser());
    }
    return new Promise((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal.removeEventListener("abort", onAbort);
          resolve(this.releaser());
        },
      };
      const onAbort = (): void => {
        const at = this.waiting.indexOf(waiter);
        if (at >= 0) this.waiting.splice(at, 1);
        reject(signal.reason as Error);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.waiting.push(waiter);
    });
  }

  private releaser(): () => void {
    let released = false;
    return () => {
      if (released) return;
      released = true;
      // Handed straight to the next waiter: the count never dips, so no newcomer overtakes it.
      const next = this.waiting.shift();
      if (next !== undefined) next.grant();
      else this.active--;
    };
  }
}
