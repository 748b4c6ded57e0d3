/**
 * A registration says where the router sends a model; it says nothing of a router that does not
 * answer (its process killed or hung, the network to it cut), through which every request fails
 * while the coordinator itself serves. The daemon's watch of the router's health URL is asked.
 */
import type { LedgerEntry } from "../../launch/index.js";
import type { Pass } from "../pass.js";
import type { ConditionUpdate } from "../status/index.js";

/** Registered when the router of a registered launch does not answer: Unknown, naming it; undefined when it answers or is not watched. */
export function routerSilence(pass: Pass, entry: LedgerEntry): ConditionUpdate | undefined {
  if (entry.routerBackend === undefined) return undefined;
  const answer = pass.world.routerAnswer();
  if (answer === undefined || answer.answering) return undefined;
  return {
    status: "Unknown",
    reason: "RouterNotAnswering",
    message: `backend "${entry.routerBackend}" is in the router's list, but the router does not answer at ${answer.url} (since ${answer.since}: ${answer.problem}): requests sent through it fail; the coordinator itself serves at ${entry.coordinatorUrl ?? "its address"}`,
  };
}
