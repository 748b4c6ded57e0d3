/** Model math of the reference engine: safetensors reading, Llama layers, sampling. */
export { readModelConfig, type ModelConfig } from "./model-config.js";
export { StageModel, type StageRange } from "./stage-model.js";
export { SequenceCache } from "./kv-cache.js";
export { Sampler, createRng, type SamplingParams, type SampledToken } from "./sampling.js";
export { indexSafetensors, type TensorEntry } from "./safetensors.js";
