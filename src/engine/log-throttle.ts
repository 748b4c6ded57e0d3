/**
 * A warning that outside traffic can repeat at will (a refused peer on the transport port) is
 * logged at most once per `windowMs` (default 10 000) for each kind (its message): the first at
 * once, the ones in between counted and reported with the next one logged. A peer opening
 * thousands of connections a second must not fill the disk the stage's log is on.
 */
export class LogThrottle {
  private readonly kinds = new Map<string, { lastAt: number; suppressed: number }>();

  constructor(
    private readonly windowMs = 10_000,
    /** Kinds remembered at most (a flood of distinct messages is one more kind past this). */
    private readonly maxKinds = 64,
  ) {}

  /** Whether to log a warning of `kind` now; if so, how many of that kind were held back since the last one. */
  take(kind: string, now = performance.now()): { log: boolean; suppressed: number } {
    const key = this.kinds.has(kind) || this.kinds.size < this.maxKinds ? kind : "";
    const state = this.kinds.get(key) ?? { lastAt: -Infinity, suppressed: 0 };
    this.kinds.set(key, state);
    if (now - state.lastAt < this.windowMs) {
      state.suppressed++;
      return { log: false, suppressed: 0 };
    }
    state.lastAt = now;
    const suppressed = state.suppressed;
    state.suppressed = 0;
    return { log: true, suppressed };
  }
}
