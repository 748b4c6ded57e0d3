/**
 * shard-engine: the reference pipeline-parallel Llama engine. A separate program: nothing here
 * imports the control plane.
 */
export { runEngine, type EngineHandle } from "./run-engine.js";
export { parseEngineArgs, EngineUsageError, engineVersion, engineFlags, usage, type EngineOptions, type ParsedArgs } from "./args.js";
export { readClusterConfig, computeStageRanges, ClusterConfigError, type ClusterConfig, type ClusterNode } from "./config/index.js";
export { readModelConfig, ModelShard, Sampler, type ModelConfig, type SamplingParams, type SampledToken } from "./model/index.js";
