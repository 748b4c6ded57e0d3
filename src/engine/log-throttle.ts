/**
 * A warning that outside traffic can repeat at will (a refused peer on the transport port) is
 * logged at most once per `windowMs` (default 10 000) for each kind: the first at once, the ones in
 * between counted and reported with the next one logged. A peer opening thousands of connections a
 * second must not fill the disk the stage's log is on. A kind is the message with what a peer
 * chose taken out (quoted text, numbers), so a peer that varies its words is still one kind; and a
 * message is logged cut to `maxShownChars`.
 */

/** The most characters of a throttled message that are logged (a peer's words may be kilobytes). */
export const maxShownChars = 300;

/** `message` as logged: at most maxShownChars characters. */
export function shownMessage(message: string): string {
  return message.length <= maxShownChars ? message : `${message.slice(0, maxShownChars)}… (${message.length} characters)`;
}

/** The kind of a message: its words without the text a peer chose (quoted strings, numbers), at most 120 characters. */
function kindOf(message: string): string {
  return message
    .replace(/"(?:[^"\\]|\\.)*"?/g, '"…"')
    .replace(/\d+/g, "N")
    .slice(0, 120);
}
export class LogThrottle {
  private readonly kinds = new Map<string, { lastAt: number; suppressed: number }>();

  constructor(
    private readonly windowMs = 10_000,
    /** Kinds remembered at most (a flood of distinct messages is one more kind past this). */
    private readonly maxKinds = 64,
  ) {}

  /** Whether to log a warning with `message` now; if so, how many of its kind were held back since the last one. */
  take(message: string, now = performance.now()): { log: boolean; suppressed: number } {
    const kind = kindOf(message);
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
