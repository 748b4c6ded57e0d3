export * from "./schema.js";
export { setCondition, findCondition, type ConditionReason, type ConditionUpdate, type ProgressReason } from "./conditions.js";
export { statusFileFor, renderStatus, writeStatus, readStatus } from "./write-status.js";
export { renderStatusSchema } from "./render-schema.js";
