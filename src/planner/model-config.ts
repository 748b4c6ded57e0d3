import { ShardctlError } from "../errors/index.js";

/** The fields of config.json the planner needs, normalised (defaults applied). */
export interface ModelConfig {
  modelType: string;
  architectures: string[];
  layers: number;
  hiddenSize: number;
  heads: number;
  /** Key/value heads; defaults to `heads` (no grouped-query attention). */
  kvHeads: number;
  /** Defaults to hiddenSize / heads. */
  headDim: number;
  vocabSize: number;
  intermediateSize?: number;
  tieWordEmbeddings: boolean;
  /** MLX affine quantization; absent for float models. */
  quantization?: { groupSize: number; bits: number };
  /** config.json `torch_dtype` (e.g. "bfloat16"), when given. */
  torchDtype?: string;
  /** Sliding attention window (tokens), when the model uses one. */
  slidingWindow?: number;
  /** Layers that use the sliding window (all layers when the config does not say otherwise). */
  slidingLayers: number[];
}

function bad(file: string, message: string): ShardctlError {
  return new ShardctlError("ModelConfigInvalid", `${file}: ${message}`, { terminal: true });
}

/**
 * Read config.json (already JSON-parsed). Multimodal checkpoints keep the language model's fields
 * under `text_config`; those win over the top level, with `model_type` falling back to the top.
 */
export function parseModelConfig(raw: unknown, file = "config.json"): ModelConfig {
  if (typeof raw !== "object" || raw === null || Array.isArray(raw)) throw bad(file, "is not a JSON object");
  const top = raw as Record<string, unknown>;
  const text = isObject(top.text_config) ? top.text_config : undefined;
  // JSON null means "not set" in many configs (e.g. "head_dim": null, "sliding_window": null).
  const get = (key: string): unknown => (text !== undefined && text[key] != null ? text[key] : (top[key] ?? undefined));

  const positive = (key: string, fallback?: number): number => {
    const v = get(key);
    if (v === undefined && fallback !== undefined) return fallback;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
      throw bad(file, v === undefined ? `${key} is missing` : `${key} must be a positive integer, got ${JSON.stringify(v)}`);
    }
    return v;
  };

  const modelType = get("model_type");
  if (typeof modelType !== "string" || modelType === "") throw bad(file, "model_type is missing");
  const layers = positive("num_hidden_layers");
  const hiddenSize = positive("hidden_size");
  const heads = positive("num_attention_heads");
  const kvHeads = positive("num_key_value_heads", heads);
  const headDim = positive("head_dim", Math.floor(hiddenSize / heads));
  const vocabSize = positive("vocab_size");
  const intermediate = get("intermediate_size");
  const architectures = Array.isArray(top.architectures) ? top.architectures.filter((a): a is string => typeof a === "string") : [];
  const tie = get("tie_word_embeddings");
  const torchDtype = get("torch_dtype") ?? get("dtype");

  const config: ModelConfig = {
    modelType,
    architectures,
    layers,
    hiddenSize,
    heads,
    kvHeads,
    headDim,
    vocabSize,
    tieWordEmbeddings: tie === true,
    slidingLayers: [],
  };
  if (typeof intermediate === "number") config.intermediateSize = intermediate;
  if (typeof torchDtype === "string") config.torchDtype = torchDtype;
  const quantization = top.quantization ?? get("quantization");
  const foreign = top.quantization_config ?? get("quantization_config");
  if (quantization === undefined && isObject(foreign) && typeof foreign.quant_method === "string") {
    throw new ShardctlError(
      "ModelNotMlx",
      `${file}: quantized with "${foreign.quant_method}" (quantization_config), not MLX affine quantization — convert it with mlx_lm.convert`,
      { terminal: true },
    );
  }
  if (isObject(quantization) && typeof quantization.bits === "number") {
    const groupSize = typeof quantization.group_size === "number" ? quantization.group_size : 64;
    config.quantization = { groupSize, bits: quantization.bits };
  }
  Object.assign(config, readSlidingWindow(get, layers));
  return config;
}

/**
 * Which layers attend through a sliding window. Newer configs list `layer_types`
 * ("sliding_attention" / "full_attention"); Qwen-style configs switch it off with
 * `use_sliding_window: false`; otherwise (Mistral) a `sliding_window` applies to every layer.
 */
function readSlidingWindow(get: (key: string) => unknown, layers: number): Pick<ModelConfig, "slidingWindow" | "slidingLayers"> {
  const window = get("sliding_window");
  if (typeof window !== "number" || !Number.isSafeInteger(window) || window < 1) return { slidingLayers: [] };
  if (get("use_sliding_window") === false) return { slidingLayers: [] };
  const types = get("layer_types");
  if (Array.isArray(types)) {
    const sliding = types.flatMap((t, i) => (t === "sliding_attention" && i < layers ? [i] : []));
    return { slidingWindow: window, slidingLayers: sliding };
  }
  return { slidingWindow: window, slidingLayers: Array.from({ length: layers }, (_, i) => i) };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
