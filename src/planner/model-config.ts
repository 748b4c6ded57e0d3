import { ShardctlError } from "../errors/index.js";
import { configBounds } from "./model-bounds.js";

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
  /** MLX quantization; absent for float models. */
  quantization?: Quantization;
  /** config.json `torch_dtype` (e.g. "bfloat16"), when given. */
  torchDtype?: string;
  /** Sliding attention window (tokens), when the model uses one. */
  slidingWindow?: number;
  /** Layers that use the sliding window (all layers when the config does not say otherwise). */
  slidingLayers: number[];
}

/** MLX quantization as config.json states it: the default for every quantized module, and per-module exceptions. */
export interface Quantization {
  /** Weights per scale (and bias). One of `quantizationGroupSizes`. */
  groupSize: number;
  /** Bits per weight. One of `quantizationBits`. */
  bits: number;
  /** "affine" (scales and biases) unless config.json names another MLX mode (e.g. "mxfp4": scales only). */
  mode: string;
  /**
   * Per-module settings keyed by module path as written in the weights ("model.layers.0.mlp.down_proj"):
   * other bits or group size, or `false` for a module left in floating point.
   */
  overrides: Record<string, { groupSize: number; bits: number } | false>;
}

/** Bits MLX's quantize kernels accept. */
export const quantizationBits: readonly number[] = [2, 3, 4, 5, 6, 8];
/** Group sizes MLX's quantize kernels accept (16 for its nvfp4 mode, 32–128 for affine). */
export const quantizationGroupSizes: readonly number[] = [16, 32, 64, 128];

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

  // Every count is bounded before it is used: it sizes arrays and products (model-bounds.ts).
  const positive = (key: string, max: number, fallback?: number): number => {
    const v = get(key);
    if (v === undefined && fallback !== undefined) return fallback;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
      throw bad(file, v === undefined ? `${key} is missing` : `${key} must be a positive integer, got ${JSON.stringify(v)}`);
    }
    if (v > max) throw bad(file, `${key} = ${v} is above the bound of ${max}, far beyond any real model — config.json is corrupt or not this model's`);
    return v;
  };

  const modelType = get("model_type");
  if (typeof modelType !== "string" || modelType === "") throw bad(file, "model_type is missing");
  const layers = positive("num_hidden_layers", configBounds.layers);
  const hiddenSize = positive("hidden_size", configBounds.hiddenSize);
  const heads = positive("num_attention_heads", configBounds.heads);
  const kvHeads = positive("num_key_value_heads", configBounds.heads, heads);
  // Grouped-query attention shares each key/value head among heads / kvHeads query heads.
  if (heads % kvHeads !== 0) throw bad(file, `num_attention_heads (${heads}) is not a multiple of num_key_value_heads (${kvHeads})`);
  const headDim = positive("head_dim", configBounds.headDim, Math.floor(hiddenSize / heads));
  const vocabSize = positive("vocab_size", configBounds.vocabSize);
  const intermediate = get("intermediate_size") === undefined ? undefined : positive("intermediate_size", configBounds.intermediateSize);
  if (Array.isArray(top.architectures) && top.architectures.length > configBounds.architectures) {
    throw bad(file, `architectures lists ${top.architectures.length} entries; at most ${configBounds.architectures} are accepted`);
  }
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
  if (intermediate !== undefined) config.intermediateSize = intermediate;
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
  if (isObject(quantization) && quantization.bits !== undefined) config.quantization = readQuantization(quantization, file);
  Object.assign(config, readSlidingWindow(get, layers, file));
  return config;
}

/**
 * MLX's `quantization` object: `group_size` (default 64), `bits`, optional `mode`, and per-module
 * entries keyed by module path whose value is `{group_size, bits}` or `false` (left unquantized).
 */
function readQuantization(raw: Record<string, unknown>, file: string): Quantization {
  const read = (value: Record<string, unknown>, where: string): { groupSize: number; bits: number } => {
    const bits = value.bits;
    const groupSize = value.group_size ?? 64;
    if (typeof bits !== "number" || !quantizationBits.includes(bits)) {
      throw bad(file, `${where}bits = ${JSON.stringify(bits)}; MLX quantizes to ${quantizationBits.join(", ")} bits`);
    }
    if (typeof groupSize !== "number" || !quantizationGroupSizes.includes(groupSize)) {
      throw bad(file, `${where}group_size = ${JSON.stringify(groupSize)}; MLX groups ${quantizationGroupSizes.join(", ")} weights`);
    }
    return { groupSize, bits };
  };
  const overrides: Quantization["overrides"] = {};
  for (const [key, value] of Object.entries(raw)) {
    if (key === "bits" || key === "group_size" || key === "mode") continue;
    if (value === false) overrides[key] = false;
    else if (isObject(value)) overrides[key] = read(value, `quantization["${key}"].`);
  }
  return { ...read(raw, "quantization."), mode: typeof raw.mode === "string" ? raw.mode : "affine", overrides };
}

/**
 * Which layers attend through a sliding window. Newer configs list `layer_types`
 * ("sliding_attention" / "full_attention"); Qwen-style configs switch it off with
 * `use_sliding_window: false`; otherwise (Mistral) a `sliding_window` applies to every layer.
 */
function readSlidingWindow(get: (key: string) => unknown, layers: number, file: string): Pick<ModelConfig, "slidingWindow" | "slidingLayers"> {
  const window = get("sliding_window");
  if (typeof window !== "number" || !Number.isSafeInteger(window) || window < 1) return { slidingLayers: [] };
  if (window > configBounds.slidingWindow) throw bad(file, `sliding_window = ${window} is above the bound of ${configBounds.slidingWindow} tokens`);
  if (get("use_sliding_window") === false) return { slidingLayers: [] };
  const types = get("layer_types");
  if (Array.isArray(types)) {
    // One entry per layer, as transformers itself requires.
    if (types.length !== layers) throw bad(file, `layer_types has ${types.length} entries but num_hidden_layers is ${layers}`);
    const sliding = types.flatMap((t, i) => (t === "sliding_attention" && i < layers ? [i] : []));
    return { slidingWindow: window, slidingLayers: sliding };
  }
  return { slidingWindow: window, slidingLayers: Array.from({ length: layers }, (_, i) => i) };
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
