/** The tone a condition's status reads in, by what its True and False mean (colour beside the word, never instead of it). */
import type { ConditionView, StatusView } from "./status-types.js";

export type ConditionTone = "good" | "bad" | "warn" | "busy" | "quiet";

/** Reasons of a False that is no fault: nothing runs (yet, or as wanted), router registration is off. */
const quietReasons = new Set(["NotRunning", "NotRegistered"]);

/**
 * Unknown is its own tone: the probe could not tell, which is neither a pass nor a fault. Reconciling
 * and Stalled say something is under way or stuck when True: their False is the quiet state, not the
 * red of a fault (a Healthy cluster showed two red Falses).
 */
export function conditionTone(c: Pick<ConditionView, "type" | "status" | "reason">): ConditionTone {
  if (c.status === "Unknown") return "warn";
  if (c.type === "Reconciling") return c.status === "True" ? "busy" : "quiet";
  if (c.type === "Stalled") return c.status === "True" ? "bad" : "quiet";
  if (c.status === "True") return "good";
  return quietReasons.has(c.reason) ? "quiet" : "bad";
}

/** A condition other than Ready that explains an unhealthy cluster: Unknown, Stalled True, or a False that is a fault. */
export function isConcern(c: ConditionView): boolean {
  // Reconciling True is work under way: health says Progressing already.
  const tone = conditionTone(c);
  return c.type !== "Ready" && (tone === "bad" || tone === "warn");
}

/** The one condition that says best why a cluster is not Healthy: Ready when it is not True, else the first concern. */
export function mainReasonOf(status: StatusView): ConditionView | undefined {
  if (status.health === "Healthy") return undefined;
  const ready = status.conditions.find((c) => c.type === "Ready");
  if (ready !== undefined && ready.status !== "True") return ready;
  return status.conditions.find(isConcern);
}
