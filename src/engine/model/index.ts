/** Model math of the reference engine: safetensors reading, Llama layers, sampling. */
export { readModelConfig, type ModelConfig } from "./model-config.js";
export { ModelShard, usefulThreads, type ShardOptions, type StageRange } from "./model-shard.js";
export { SequenceCache } from "./kv-cache.js";
export { Sampler, createRng, type SamplingParams, type SampledToken } from "./sampling.js";
export { indexSafetensors, type TensorEntry, type TensorIndex } from "./safetensors.js";
