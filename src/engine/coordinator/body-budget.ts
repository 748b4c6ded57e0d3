/**
 * The memory the coordinator lets request bodies hold, all requests together. A request holds its
 * share from its first byte until it takes a generation slot: while its body arrives, is parsed
 * and tokenized, and while it waits in the queue. Without a bound, clients that send large bodies
 * slowly, or queue many requests, hold memory without limit on the machine that also holds the
 * weights (a body may be 4 MiB: a thousand stalled uploads are 4 GiB). A request that does not fit
 * is answered 503 at once, its body read and dropped, and the requests already admitted go on.
 */
export class BodyBudget {
  private heldBytes = 0;

  /**
   * `limitBytes`: what all requests may hold together. `perRequestBytes`: what each counts for
   * besides its body (its parsed form, its place in the queue), so that many small requests waiting
   * are bounded too.
   */
  constructor(
    readonly limitBytes: number,
    readonly perRequestBytes: number,
  ) {}

  /** A share for one request: it starts at `perRequestBytes` when that fits (else `fits` is false). */
  open(): BodyShare {
    return new BodyShare(this);
  }

  /** Take `bytes` more when they fit. */
  take(bytes: number): boolean {
    if (this.heldBytes + bytes > this.limitBytes) return false;
    this.heldBytes += bytes;
    return true;
  }

  give(bytes: number): void {
    this.heldBytes -= bytes;
  }
}

/** One request's share of a BodyBudget: grown as its body arrives, given back once (idempotent). */
export class BodyShare {
  private bytes = 0;
  private released = false;
  private refused = false;

  constructor(private readonly budget: BodyBudget) {
    this.growTo(0);
  }

  /** False once the budget could not give this request what it asked for. */
  get fits(): boolean {
    return !this.refused;
  }

  /** What all requests may hold together, bytes. */
  get limitBytes(): number {
    return this.budget.limitBytes;
  }

  /** Hold room for a body of `bodyBytes`; false (and `fits` false) when the budget has none. */
  growTo(bodyBytes: number): boolean {
    // Once refused, always: a request is admitted whole or not at all.
    if (this.refused) return false;
    const want = this.budget.perRequestBytes + bodyBytes;
    if (this.released || want <= this.bytes) return true;
    if (!this.budget.take(want - this.bytes)) {
      this.refused = true;
      return false;
    }
    this.bytes = want;
    return true;
  }

  release(): void {
    if (this.released) return;
    this.released = true;
    this.budget.give(this.bytes);
    this.bytes = 0;
  }
}
