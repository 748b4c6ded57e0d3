/**
 * At most `size` pieces of work at once; the others wait their turn, in order. Each node's staging
 * places are one (see NodePlaces): the daemon's passes step aside from the work queue while they
 * stage (a download of a large model takes hours, and a delete of another cluster must not wait for
 * it), and take a place on a node before each transfer there (or before hashing every file,
 * `verify = "full"`); a staging that finds its files in place by the stat cache needs none.
 */
export class Slots {
  private used = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly size: number) {}

  /** Run `work` in a slot; `{ ran: false }`, without running it, when `signal` aborts while it waits. */
  async run<T>(work: () => Promise<T>, signal?: AbortSignal): Promise<{ ran: true; value: T } | { ran: false }> {
    const release = await this.acquire(signal);
    if (release === undefined) return { ran: false };
    try {
      return { ran: true, value: await work() };
    } finally {
      release();
    }
  }

  /** Take a slot, for work whose end is not one call's: its release (once), or undefined when `signal` aborts while it waits. */
  async acquire(signal?: AbortSignal): Promise<(() => void) | undefined> {
    if (!(await this.take(signal))) return undefined;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.used--;
      this.waiting.shift()?.();
    };
  }

  /** Work waiting for a slot now. */
  get queued(): number {
    return this.waiting.length;
  }

  /** Whether work given now would wait for a slot. */
  get full(): boolean {
    return this.used >= this.size;
  }

  /** Slots in all. */
  get capacity(): number {
    return this.size;
  }

  private take(signal: AbortSignal | undefined): Promise<boolean> {
    if (signal?.aborted === true) return Promise.resolve(false);
    if (this.used < this.size) {
      this.used++;
      return Promise.resolve(true);
    }
    return new Promise((resolve) => {
      const turn = (): void => {
        signal?.removeEventListener("abort", leave);
        this.used++;
        resolve(true);
      };
      const leave = (): void => {
        const at = this.waiting.indexOf(turn);
        if (at >= 0) this.waiting.splice(at, 1);
        resolve(false);
      };
      this.waiting.push(turn);
      signal?.addEventListener("abort", leave, { once: true });
    });
  }
}
