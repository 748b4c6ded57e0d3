import type { ModelProfile } from "./model-profile.js";

/** The KV cache grows in steps of 256 tokens, so the context is rounded up to a multiple of it. */
export const kvStepTokens = 256;

export interface KvOptions {
  /** Tokens per sequence. */
  contextLength: number;
  /** Concurrent sequences. Default 1. */
  maxSequences?: number;
  /** Half-open layer range; default every layer. */
  layers?: [start: number, end: number];
}

/**
 * KV-cache bytes of each layer: 2 (K and V) × kv_heads × head_dim × ctx × bytes per element ×
 * sequences, ctx rounded up to 256 tokens; sliding-window layers hold at most the window.
 */
export function layerKvBytes(profile: ModelProfile, contextLength: number, maxSequences = 1): number[] {
  const { kvHeads, headDim, slidingWindow, slidingLayers } = profile.config;
  const rounded = Math.ceil(contextLength / kvStepTokens) * kvStepTokens;
  const sliding = new Set(slidingLayers);
  const perToken = 2 * kvHeads * headDim * profile.kvBytesPerElement * maxSequences;
  return Array.from({ length: profile.layers }, (_, i) => {
    const tokens = slidingWindow !== undefined && sliding.has(i) ? Math.min(rounded, slidingWindow) : rounded;
    return perToken * tokens;
  });
}

/** KV-cache bytes of a layer range (default: the whole model). */
export function kvCacheBytes(profile: ModelProfile, options: KvOptions): number {
  const [start, end] = options.layers ?? [0, profile.layers];
  return layerKvBytes(profile, options.contextLength, options.maxSequences ?? 1)
    .slice(start, end)
    .reduce((a, b) => a + b, 0);
}
