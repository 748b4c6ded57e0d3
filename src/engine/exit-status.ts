/**
 * How shard-engine tells whoever supervises it why it exits. A pipeline member that loses a peer
 * exits (a pipeline cannot survive the loss of one), so the member that exits first is often not the
 * one that failed: when a peer merely stops answering (stopped, a frozen VM, cut off), its own
 * process lives on while its peers exit. Those peers say which member went silent, so a supervisor
 * can name it instead of the one that exited because of it.
 */
import type { Logger } from "./log.js";
import type { Link } from "./transport/index.js";

/** Every failure that is not a silent peer: a usage error, an unreadable file, a link closed or reset. */
export const failureExitStatus = 1;

/**
 * A peer stopped answering: nothing came over its link for the liveness bound (2500 ms, see
 * transport/liveness.ts). The process has logged `peerSilentLog` naming the peer by its node id (a
 * stage just before it exits; the coordinator when the link died, as it answers /health 503 for a
 * while before it exits). 69 is sysexits' EX_UNAVAILABLE: Node.js itself exits with 1 to 14, a
 * shell with 126 and 127, a signal with 128 + its number, so none of them reads as this.
 */
export const peerSilentExitStatus = 69;

/**
 * The `msg` of the log line that names the silent peer, one JSON line with `peer` (its node id),
 * `link` (what the peer is to this process), `silentMs` (how long nothing came from it, ms) and
 * `deadAfterMs` (the bound, ms). src/engines/reference reads it by this text: keep them equal.
 */
export const peerSilentLog = "peer silent";

/** A peer declared dead for silence: who, which link, and for how long nothing came from it (ms). */
export interface SilentPeer {
  /** The peer's node id, as the cluster file names it (`stage-0`, `coordinator`). */
  peer: string;
  /** What the peer is to the process that reports it: `upstream`, `downstream`, `coordinator` or `stage`. */
  link: "upstream" | "downstream" | "coordinator" | "stage";
  silentMs: number;
  deadAfterMs: number;
}

/**
 * The `msg` of the line a pipeline member logs, as its pipeline breaks, for each peer it still heard
 * from within half the liveness bound: `peer` (its node id) and `heardMsAgo`. Such a peer was
 * answering then, whatever another member says of the link between them: a cut between two members
 * leaves both answering a third. src/engines/reference reads it by this text: keep them equal.
 */
export const peerAnsweringLog = "peer answering";

/**
 * Say which of `links` were still heard from as the pipeline broke: those heard within half the
 * liveness bound. A live link is heard at least every heartbeat and tick (600 ms). A member that
 * went silent is declared dead by a peer only after the whole bound less that (2500 − 600 ms), so
 * when that peer's exit breaks the pipeline it has not been heard for longer than half the bound
 * by anyone.
 */
export function logAnsweringPeers(log: Logger, links: ReadonlyArray<{ peer: string; link: Pick<Link, "heardMsAgo" | "deadAfterMs"> }>): void {
  const now = performance.now();
  // A peer may hold two links (the last stage's coordinator: its control link and the results
  // link): it answers when either was heard lately, said once, with the most recent.
  const heard = new Map<string, number>();
  for (const { peer, link } of links) {
    const heardMsAgo = link.heardMsAgo(now);
    if (heardMsAgo < link.deadAfterMs / 2) heard.set(peer, Math.min(heardMsAgo, heard.get(peer) ?? Infinity));
  }
  for (const [peer, heardMsAgo] of heard) log.info({ peer, heardMsAgo }, peerAnsweringLog);
}

/**
 * The `msg` of the line that names the peer whose link closed (reset, or closed by the peer's end:
 * it exited, was killed, or closed the link itself), one JSON line with `peer` (its node id), `link`
 * (what the peer is to this process) and `reason` (how the link ended). A stage logs it just before
 * it exits with status 1; the coordinator as its pipeline breaks, for the link that broke it. Its
 * peers exit milliseconds after a member dies, so a supervisor that sees one of their exits first
 * can look for the member it names. src/engines/reference reads it by this text: keep them equal.
 */
export const peerLostLog = "peer lost";

/** A peer whose link closed: who, which link, and how the link ended. */
export interface LostPeer {
  /** The peer's node id, as the cluster file names it (`stage-0`, `coordinator`). */
  peer: string;
  /** What the peer is to the process that reports it: `upstream`, `downstream`, `coordinator` or `stage`. */
  link: SilentPeer["link"];
  reason: string;
}

/** Log the line naming the peer whose link closed. */
export function logLostPeer(log: Logger, lost: LostPeer): void {
  log.error({ peer: lost.peer, link: lost.link, reason: lost.reason }, peerLostLog);
}

/** Log the line naming the silent peer. */
export function logSilentPeer(log: Logger, silent: SilentPeer): void {
  log.error({ peer: silent.peer, link: silent.link, silentMs: silent.silentMs, deadAfterMs: silent.deadAfterMs }, peerSilentLog);
}
