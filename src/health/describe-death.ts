import type { DeathConsequence, DeathEvent } from "./types.js";

/**
 * A death in words: the member blamed and what was seen of it, `how` it ended when known (` (killed
 * by SIGKILL (status 137))`), then each member seen exiting because of it — "stage-1 on n2: pid 4242
 * exited; stage-0 on n1: pid 4240 exited because its link to stage-1 broke (connection closed)".
 * The dashboard marks every member named in a part of its own (before "; ") as dead.
 */
export function describeDeath(death: Pick<DeathEvent, "label" | "node" | "detail" | "consequences">, how = ""): string {
  const consequences = (death.consequences ?? []).map((c) => `; ${c.label} on ${c.node}: ${c.detail}`).join("");
  return `${death.label} on ${death.node}: ${death.detail}${how}${consequences}`;
}

/**
 * The words of a member blamed although it says it exited because it lost its link to a peer, when
 * that peer was not seen gone: still running (`alive`: a link reset between two live members) or
 * not answering when asked (`unknown`: a node too busy or cut off to tell). The blame stays, and the
 * status says what the member said and what was seen of the peer.
 */
export function blamedForLostLink(seen: string, lost: { peer: string; reason: string }, peer: "alive" | "unknown"): string {
  const found = peer === "alive" ? `${lost.peer} still runs` : `${lost.peer} did not answer when asked whether it runs`;
  return `${lostLinkWords(seen, lost)}, and ${found}`;
}

/** A member `seen` gone (`pid 4240 exited`) because its link to the member it `lost` broke, in the words a death carries. */
export function consequenceOf(label: string, node: string, seen: string, lost: { peer: string; reason: string }): DeathConsequence {
  return { label, node, detail: lostLinkWords(seen, lost) };
}

/** "pid 4240 exited because its link to stage-1 broke (connection closed)". */
function lostLinkWords(seen: string, lost: { peer: string; reason: string }): string {
  return `${seen} because its link to ${lost.peer} broke (${lost.reason})`;
}
