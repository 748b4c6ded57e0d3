/**
 * In-band liveness of established links. A partitioned peer (packets silently dropped: no FIN, no
 * RST) leaves a TCP connection open for minutes, so every link sends a heartbeat frame when it has
 * sent nothing for `heartbeatMs` and is declared dead when it has received nothing — no byte, not
 * even part of a large frame — for `deadAfterMs`.
 *
 * Why 500 ms / 2500 ms: the goal is a silent peer declared dead within 3 s, with no false positive
 * on an idle cluster or on a link with 20 ms delay and 5 % loss. On such a link Linux retransmits a
 * lost segment after RTO ≈ RTT + 200 ms (the minimum RTO) ≈ 240 ms and doubles it on each further
 * loss of the same segment, and TCP delivers in order, so every heartbeat behind a lost one waits
 * for it. The receiver then hears nothing for at most (time since the last heartbeat, ≤ 600 ms with
 * the 100 ms tick) + the retransmission delay: 240 ms (one loss, p = 5 %), 720 ms (two, 0.25 %),
 * 1680 ms (three in a row, 0.0125 %) — all under 2500 ms; only four losses in a row of one segment
 * (p ≈ 6e-6, about one per day per direction at two segments a second) exceed it. Detection takes
 * at most deadAfterMs + tickMs = 2600 ms after the last byte heard, inside the 3 s goal.
 *
 * A process whose event loop was blocked (a stage computing a long prefill runs its kernels
 * synchronously on the main thread) cannot read its sockets meanwhile: the tick measures its own
 * lateness and that time is not counted as the peers' silence. The blocked side keeps its own
 * heartbeats flowing from a helper thread (compute-heartbeat.ts).
 */

/** Interval and bound of link liveness, ms. */
export interface LivenessBounds {
  /** Send a heartbeat when nothing was sent for this long, ms. Default 500. */
  heartbeatMs: number;
  /** Declare the link dead when nothing was received for this long, ms. Default 2500. */
  deadAfterMs: number;
}

export const defaultLiveness: LivenessBounds = { heartbeatMs: 500, deadAfterMs: 2500 };

/** How often links are checked, ms. */
export const tickMs = 100;
/** Lateness of a tick above which this process counts as having been blocked, ms. */
const blockedLagMs = 50;

/** What the monitor needs of a link. */
export interface Watched {
  /** Check the link at `now` (performance.now() ms): send a heartbeat, or declare it dead. */
  tick(now: number): void;
  /** This process was blocked for `ms`: do not count that time as the peer's silence. */
  creditBlocked(ms: number): void;
}

const watched = new Set<Watched>();
let timer: NodeJS.Timeout | undefined;
let lastTick = 0;

/** Check `link` on every tick until `unwatch`. One timer serves every link of the process. */
export function watch(link: Watched): void {
  watched.add(link);
  if (timer !== undefined) return;
  lastTick = performance.now();
  timer = setInterval(checkLinks, tickMs);
  // Liveness never keeps a process alive on its own.
  timer.unref();
}

export function unwatch(link: Watched): void {
  watched.delete(link);
  if (watched.size === 0 && timer !== undefined) {
    clearInterval(timer);
    timer = undefined;
  }
}

function checkLinks(): void {
  const now = performance.now();
  const lag = now - lastTick - tickMs;
  lastTick = now;
  // Timers run before the poll phase, so after a block the bytes that arrived meanwhile are still
  // unread: credit the blocked time before judging anyone.
  if (lag > blockedLagMs) for (const link of watched) link.creditBlocked(lag);
  for (const link of [...watched]) link.tick(now);
}
