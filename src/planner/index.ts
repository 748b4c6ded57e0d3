/**
 * The planner: model inspection (config.json + safetensors headers, local or over HTTP Range
 * requests) and the shard plan (pure functions). Depends only on src/spec, src/errors, src/files
 * (reading local model files safely) and src/engines (whose facts decide the split, the validated
 * families and the advice).
 */
export { inspectModel, inspectWithReader } from "./inspect-model.js";
export type { ModelSource, SourceReader, RawHeader } from "./model-source.js";
export { parseModelConfig, quantizationBits, quantizationGroupSizes, type ModelConfig, type Quantization } from "./model-config.js";
export { configBounds, maxConfigBytes, maxIndexBytes, maxModelHeaderBytes, maxModelTensors, maxSafetensorsFiles } from "./model-bounds.js";
export { checkModelTensors } from "./check-tensors.js";
export { checkModelFormat } from "./check-model-format.js";
export { buildModelProfile, type ModelProfile, type ModelFile, type HeaderFile, type StoredDtype } from "./model-profile.js";
export {
  countHeaderEntries,
  parseSafetensorsHeader,
  readHeaderLength,
  dtypeElementBytes,
  maxHeaderBytes,
  safetensorsDtypes,
  type SafetensorsHeader,
  type TensorEntry,
} from "./safetensors-header.js";
export { filesForStage, type StageShape } from "./files-for-stage.js";
export { kvCacheBytes, layerKvBytes, kvStepTokens, type KvOptions } from "./kv-cache.js";
export { nodeBudget, budgetOf, budgetRule, budgetSources, budgetSourceLabels, defaultHeadroom, type PlanNode, type BudgetSource } from "./node-budget.js";
export { memorySplit, type SplitInput } from "./memory-split.js";
export { planShards } from "./plan-shards.js";
export type { PlanOptions, PlanMessage, StagePlan, ShardPlan, PlanTotals } from "./plan-types.js";
export { renderPlanText, renderPlanMarkdown, renderFitBar, describeInfeasiblePlan } from "./render-plan.js";
export { codeSpan } from "./markdown-text.js";
export { formatBytes } from "./format-bytes.js";
export { makeTestModel, byteToUnicode, byteLevelTokenizerJson, specialToken, type TestModelOptions, type TestModel, type FloatDtype } from "./test-model/index.js";
export { planCluster, modelSourceOf, planNodesOf, type ClusterPlan, type NodeFacts } from "./plan-cluster.js";
