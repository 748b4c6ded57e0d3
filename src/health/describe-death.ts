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

/** A member `seen` gone (`pid 4240 exited`) because its link to the member it `lost` broke, in the words a death carries. */
export function consequenceOf(label: string, node: string, seen: string, lost: { peer: string; reason: string }): DeathConsequence {
  return { label, node, detail: `${seen} because its link to ${lost.peer} broke (${lost.reason})` };
}
