export * from "./schema.js";
export { setCondition, findCondition, type ConditionUpdate } from "./conditions.js";
export { statusFileFor, renderStatus, writeStatus, readStatus } from "./write-status.js";
export { renderStatusSchema } from "./render-schema.js";
