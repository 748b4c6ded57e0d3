/**
 * Admission: at most `limit` sequences generate at once, as many as the KV caches were planned
 * for (`--max-sequences`, the definition's `max_sequences`). The rest wait in arrival order; one
 * whose client goes away while it waits leaves the queue without ever being computed. Without the
 * limit every request would be sent to the first stage at once: each takes a KV cache (memory
 * grows past the plan), and a stage works through its frames in arrival order, so the release of
 * an abandoned request would queue behind everything sent before it.
 *
 * The queue is bounded too (`--max-queued`): a request that finds `queueLimit` others waiting is
 * refused at once (QueueFull), so an overloaded server says so — clients back off and retry, or
 * go elsewhere — instead of holding every caller silent until its own timeout fires, after which
 * its retry joins the back of the same queue.
 */
export class SequenceSlots {
  private active = 0;
  private readonly waiting: Array<{ grant: () => void }> = [];

  constructor(
    readonly limit: number,
    readonly queueLimit = Number.POSITIVE_INFINITY,
  ) {
    if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`Expected a positive integer limit, got ${limit}`);
    if (queueLimit !== Number.POSITIVE_INFINITY && (!Number.isInteger(queueLimit) || queueLimit < 0)) {
      throw new RangeError(`Expected a queue limit of 0 or more, got ${queueLimit}`);
    }
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
   * reason when the signal aborts first: the request then never takes a slot. Throws QueueFull
   * when every slot is taken and `queueLimit` requests already wait.
   */
  acquire(signal: AbortSignal): Promise<() => void> {
    signal.throwIfAborted();
    if (this.active < this.limit) {
      this.active++;
      return Promise.resolve(this.releaser());
    }
    if (this.waiting.length >= this.queueLimit) throw new QueueFull(this.limit, this.queueLimit);
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

/** Every slot is taken and the queue holds its limit: the request is refused without waiting. */
export class QueueFull extends Error {
  override readonly name = "QueueFull";

  constructor(
    readonly limit: number,
    readonly queueLimit: number,
  ) {
    super(`all ${limit} sequences are generating and ${queueLimit} requests wait for one`);
  }
}
