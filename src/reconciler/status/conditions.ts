import { type Condition, type ConditionType, conditionTypes } from "./schema.js";

export interface ConditionUpdate {
  status: Condition["status"];
  reason: string;
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
