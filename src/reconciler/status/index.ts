export * from "./schema.js";
export { setCondition, findCondition, type ConditionReason, type ConditionUpdate, type ProgressReason } from "./conditions.js";
export { statusFileFor, renderStatus, writeStatus } from "./write-status.js";
export { readStatus } from "./read-status.js";
export { renderStatusSchema } from "./render-schema.js";
