/**
 * The planner: model inspection (config.json + safetensors headers, local or over HTTP Range
 * requests) and the shard plan (pure functions). Depends only on src/spec, src/errors and
 * src/engines (whose facts decide the split, the validated families and the advice).
 */
export { inspectModel, inspectWithReader } from "./inspect-model.js";
export type { ModelSource, SourceReader, RawHeader } from "./model-source.js";
export { parseModelConfig, type ModelConfig } from "./model-config.js";
export { buildModelProfile, type ModelProfile, type ModelFile, type HeaderFile } from "./model-profile.js";
export { parseSafetensorsHeader, readHeaderLength, dtypeElementBytes, maxHeaderBytes, type SafetensorsHeader, type TensorEntry } from "./safetensors-header.js";
export { filesForStage, type StageShape } from "./files-for-stage.js";
export { kvCacheBytes, layerKvBytes, kvStepTokens, type KvOptions } from "./kv-cache.js";
export { nodeBudget, defaultHeadroom, type PlanNode } from "./node-budget.js";
export { memorySplit, type SplitInput } from "./memory-split.js";
export { planShards } from "./plan-shards.js";
export type { PlanOptions, PlanMessage, StagePlan, ShardPlan, PlanTotals } from "./plan-types.js";
export { renderPlanText, renderPlanMarkdown, renderFitBar } from "./render-plan.js";
export { formatBytes } from "./format-bytes.js";
export { makeTestModel, type TestModelOptions, type TestModel, type FloatDtype } from "./test-model/index.js";
export { planCluster, modelSourceOf, planNodesOf, type ClusterPlan, type NodeFacts } from "./plan-cluster.js";
