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

/**
 * Large heartbeats. Every frame above is small (a few bytes), as are the daemon's probes, ping and
 * SSH's keystrokes, so a path that passes only small packets — a path-MTU black hole: a tunnel, VPN
 * or switch with a smaller MTU and ICMP "fragmentation needed" filtered — looks healthy for as long
 * as the cluster idles, and fails its first request. So an idle link pads one heartbeat to
 * `largeHeartbeatBytes` (more than any path MTU, jumbo frames included: TCP cuts it into full-size
 * segments) whenever it has sent no frame that large for `largeHeartbeatEveryMs`. Through a black
 * hole those segments are dropped and resent without end, every later frame waits behind them in
 * the byte stream, and the peer hears nothing: the link is declared dead one bound later, as a
 * silent one is, while nobody uses the cluster.
 */
export const largeHeartbeatBytes = 16 * 1024;

/** How long an idle link may go without sending a frame of `largeHeartbeatBytes`, ms; 0: never padded. Default 30000 (shard-engine --large-heartbeat-ms). */
let largeHeartbeatEveryMs = 30_000;

/** Set how often an idle link pads a heartbeat, ms (0: never), for every link of this process. */
export function padHeartbeatsEvery(ms: number): void {
  largeHeartbeatEveryMs = ms;
}

/** Whether a link that last sent a large frame at `lastLargeSent` pads its next heartbeat, at `now` (performance.now() ms). */
export function largeHeartbeatDue(lastLargeSent: number, now: number): boolean {
  return largeHeartbeatEveryMs > 0 && now - lastLargeSent >= largeHeartbeatEveryMs;
}

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
