import type { Reason } from "../../errors/index.js";
import { type Condition, type ConditionType, conditionTypes } from "./schema.js";

/**
 * The reasons a condition says what is going on with, besides the reasons of failures (every
 * `Reason` of the error catalogues: a stall's, a death's, a step's failure).
 */
export type ProgressReason =
  /** Ready=True: serving at its revision. */
  | "ClusterReady"
  /** Reconciling/Stalled=False: running at the desired revision. */
  | "Converged"
  | "PlanFeasible"
  | "AllNodesPresent"
  | "AllStagesListening"
  | "HealthOk"
  | "BackendRegistered"
  /** Registered=False: the definition does not ask for the router. */
  | "NotRegistered"
  /** While the step runs. */
  | "Planning"
  | "Staging"
  | "Launching"
  | "Replacing"
  | "TearingDown"
  /** A pass stopped before launching: the definition asked for another revision meanwhile. */
  | "Superseded"
  /** A pass stopped before launching: the daemon was stopping. */
  | "DaemonStopping"
  /** The definition is gone, for less than the removal grace: torn down once that has passed, unless it comes back. */
  | "DefinitionRemoved"
  /** Nothing runs for this cluster (stopped, suspended, not launched yet). */
  | "NotRunning"
  | "RetryingAfterError"
  | "RetryRequested"
  | "Stopped"
  | "Suspended"
  | "DistributedDisabled"
  | "TornDownOnExit";

export type ConditionReason = Reason | ProgressReason;

export interface ConditionUpdate {
  status: Condition["status"];
  reason: ConditionReason;
  message: string;
}

/**
 * Set one condition, keeping `lastTransitionTime` unless the status flips (as Kubernetes does),
 * and return the list in the fixed order of `conditionTypes` so files diff cleanly.
 */
export function setCondition(conditions: readonly Condition[], type: ConditionType, update: ConditionUpdate, revision: string, now: Date): Condition[] {
  const previous = conditions.find((c) => c.type === type);
  const lastTransitionTime = previous !== undefined && previous.status === update.status ? previous.lastTransitionTime : now.toISOString();
  const next: Condition = { type, ...update, lastTransitionTime, observedRevision: revision };
  return orderConditions([...conditions.filter((c) => c.type !== type), next]);
}

/** The condition of a type, if present. */
export function findCondition(conditions: readonly Condition[], type: ConditionType): Condition | undefined {
  return conditions.find((c) => c.type === type);
}

function orderConditions(conditions: Condition[]): Condition[] {
  return conditions.sort((a, b) => conditionTypes.indexOf(a.type) - conditionTypes.indexOf(b.type));
}
