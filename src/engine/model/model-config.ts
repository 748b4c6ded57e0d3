/** The parts of a Llama-family config.json the engine uses, normalised with defaults. */
import { join } from "node:path";
import { readJsonFile } from "./read-json-file.js";

export interface RopeScaling {
  factor: number;
  lowFreqFactor: number;
  highFreqFactor: number;
  originalMaxPositionEmbeddings: number;
}

export interface ModelConfig {
  hiddenSize: number;
  intermediateSize: number;
  layers: number;
  heads: number;
  kvHeads: number;
  headDim: number;
  vocabSize: number;
  rmsNormEps: number;
  ropeTheta: number;
  /** Llama-3 rope_scaling, or undefined for plain RoPE. */
  ropeScaling: RopeScaling | undefined;
  /** Longest sequence (prompt + completion) accepted, tokens. */
  maxPositions: number;
  tieWordEmbeddings: boolean;
  /** MLX affine quantization defaults; per-module overrides are read from the same object. */
  quantization: { groupSize: number; bits: number; overrides: Record<string, { groupSize: number; bits: number }> } | undefined;
  eosTokenIds: number[];
  bosTokenId: number | undefined;
}

function positiveInt(raw: Record<string, unknown>, key: string, fallback?: number): number {
  const value = raw[key] ?? fallback;
  if (typeof value !== "number" || !Number.isInteger(value) || value < 1) {
    throw new Error(`config.json: expected \`${key}\` to be a positive integer, got ${JSON.stringify(value)}`);
  }
  return value;
}

/** Read and normalise `<dir>/config.json`. */
export function readModelConfig(dir: string): ModelConfig {
  const raw = readJsonFile(join(dir, "config.json")) as Record<string, unknown>;
  const hiddenSize = positiveInt(raw, "hidden_size");
  const heads = positiveInt(raw, "num_attention_heads");
  const scaling = raw.rope_scaling as Record<string, unknown> | null | undefined;
  let ropeScaling: RopeScaling | undefined;
  if (scaling !== null && scaling !== undefined) {
    const type = scaling.rope_type ?? scaling.type;
    if (type !== "llama3") throw new Error(`config.json: rope_scaling type ${JSON.stringify(type)} is not supported (only llama3)`);
    ropeScaling = {
      factor: positiveNumber(scaling.factor, "rope_scaling.factor"),
      lowFreqFactor: positiveNumber(scaling.low_freq_factor, "rope_scaling.low_freq_factor"),
      highFreqFactor: positiveNumber(scaling.high_freq_factor, "rope_scaling.high_freq_factor"),
      originalMaxPositionEmbeddings: positiveNumber(scaling.original_max_position_embeddings, "rope_scaling.original_max_position_embeddings"),
    };
    if (ropeScaling.highFreqFactor <= ropeScaling.lowFreqFactor) throw new Error("config.json: rope_scaling.high_freq_factor must exceed low_freq_factor");
  }
  const q = raw.quantization as Record<string, unknown> | undefined;
  let quantization: ModelConfig["quantization"];
  if (q !== undefined && q !== null) {
    const overrides: Record<string, { groupSize: number; bits: number }> = {};
    for (const [key, value] of Object.entries(q)) {
      if (value !== null && typeof value === "object") {
        const o = value as Record<string, unknown>;
        overrides[key] = { groupSize: Number(o.group_size ?? q.group_size), bits: Number(o.bits ?? q.bits) };
      }
    }
    quantization = { groupSize: Number(q.group_size ?? 64), bits: Number(q.bits ?? 4), overrides };
  }
  const eos = raw.eos_token_id;
  const eosTokenIds = Array.isArray(eos) ? eos.filter((v): v is number => typeof v === "number") : typeof eos === "number" ? [eos] : [];
  return {
    hiddenSize,
    intermediateSize: positiveInt(raw, "intermediate_size"),
    layers: positiveInt(raw, "num_hidden_layers"),
    heads,
    kvHeads: positiveInt(raw, "num_key_value_heads", heads),
    headDim: positiveInt(raw, "head_dim", hiddenSize / heads),
    vocabSize: positiveInt(raw, "vocab_size"),
    rmsNormEps: positiveNumber(raw.rms_norm_eps, "rms_norm_eps", 1e-5),
    ropeTheta: positiveNumber(raw.rope_theta, "rope_theta", 10000),
    ropeScaling,
    maxPositions: typeof raw.max_position_embeddings === "number" ? raw.max_position_embeddings : 4096,
    tieWordEmbeddings: raw.tie_word_embeddings === true,
    quantization,
    eosTokenIds,
    bosTokenId: typeof raw.bos_token_id === "number" ? raw.bos_token_id : undefined,
  };
}

/** A positive finite number of config.json, or `fallback` when absent (none: required). */
function positiveNumber(value: unknown, name: string, fallback?: number): number {
  if (value === undefined || value === null) {
    if (fallback !== undefined) return fallback;
    throw new Error(`config.json: ${name} is missing`);
  }
  if (typeof value !== "number" || !Number.isFinite(value) || value <= 0) throw new Error(`config.json: ${name} must be a positive number, got ${JSON.stringify(value)}`);
  return value;
}
