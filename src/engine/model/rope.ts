/** Rotary position embeddings, half-split rotation (as mlx-lm and Hugging Face apply it). */
import type { ModelConfig } from "./model-config.js";

/** Inverse frequencies per rotated pair, with Llama-3 rope_scaling applied when configured. */
export function computeInverseFrequencies(config: ModelConfig): Float64Array {
  const half = config.headDim / 2;
  const inv = new Float64Array(half);
  for (let i = 0; i < half; i++) inv[i] = 1 / config.ropeTheta ** ((2 * i) / config.headDim);
  const s = config.ropeScaling;
  if (s === undefined) return inv;
  const lowFreqWavelen = s.originalMaxPositionEmbeddings / s.lowFreqFactor;
  const highFreqWavelen = s.originalMaxPositionEmbeddings / s.highFreqFactor;
  for (let i = 0; i < half; i++) {
    const f = inv[i] as number;
    const wavelen = (2 * Math.PI) / f;
    if (wavelen < highFreqWavelen) continue;
    if (wavelen > lowFreqWavelen) {
      inv[i] = f / s.factor;
    } else {
      const smooth = (s.originalMaxPositionEmbeddings / wavelen - s.lowFreqFactor) / (s.highFreqFactor - s.lowFreqFactor);
      inv[i] = (1 - smooth) * (f / s.factor) + smooth * f;
    }
  }
  return inv;
}

/** Rotate `heads` vectors of `headDim` floats at `off` in place for position `pos`. */
export function applyRope(v: Float32Array, off: number, heads: number, headDim: number, pos: number, inv: Float64Array, cos: Float64Array, sin: Float64Array): void {
  const half = headDim / 2;
  for (let i = 0; i < half; i++) {
    const angle = pos * (inv[i] as number);
    cos[i] = Math.cos(angle);
    sin[i] = Math.sin(angle);
  }
  for (let h = 0; h < heads; h++) {
    const base = off + h * headDim;
    for (let i = 0; i < half; i++) {
      const x1 = v[base + i] as number;
      const x2 = v[base + i + half] as number;
      const c = cos[i] as number,
        s = sin[i] as number;
      v[base + i] = x1 * c - x2 * s;
      v[base + i + half] = x2 * c + x1 * s;
    }
  }
}
