import { quoteText, ShardctlError } from "../errors/index.js";
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
  /** The type config.json's `rope_scaling` names (`rope_type`, else `type`); "" when it names none. Undefined: no rope_scaling. */
  ropeScalingType?: string;
  /** Whether the language model's fields were read from `text_config` (a multimodal checkpoint) rather than the top level. */
  textConfig: boolean;
  /** The fields config.json gives a value (not null) where the language model's are read, sorted: what an engine that requires one asks. */
  statedFields: string[];
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
   * other bits or group size, or `false` for a module left in floating point. The keys are the
   * model's: look one up with Object.hasOwn, never by plain indexing.
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
  // JSON null means "not set" in many configs (e.g. "head_dim": null, "sliding_window": null). Own
  // properties only: statedFields asks for every key the file has, "__proto__" included.
  const own = (object: Record<string, unknown>, key: string): unknown => (Object.hasOwn(object, key) ? object[key] : undefined);
  const get = (key: string): unknown => (text !== undefined && own(text, key) != null ? own(text, key) : (own(top, key) ?? undefined));

  // Every count is bounded before it is used: it sizes arrays and products (model-bounds.ts).
  const positive = (key: string, max: number, fallback?: number): number => {
    const v = get(key);
    if (v === undefined && fallback !== undefined) return fallback;
    if (typeof v !== "number" || !Number.isSafeInteger(v) || v < 1) {
      throw bad(file, v === undefined ? `${key} is missing` : `${key} must be a positive integer, got ${quoteText(v)}`);
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
    textConfig: text !== undefined,
    statedFields: [...new Set([...Object.keys(top), ...Object.keys(text ?? {})])].filter((key) => get(key) !== undefined).sort(),
  };
  if (intermediate !== undefined) config.intermediateSize = intermediate;
  // No engine serves a context that is not a positive number of tokens (shard-engine would load the
  // model, then refuse every request: "context of 1 tokens exceeds the limit of -5").
  const maxPositions = get("max_position_embeddings");
  if (maxPositions !== undefined && (typeof maxPositions !== "number" || !Number.isSafeInteger(maxPositions) || maxPositions < 1)) {
    throw bad(
      file,
      `max_position_embeddings must be a positive integer (the most tokens a sequence may hold), got ${quoteText(maxPositions)}: ` +
        "no engine serves that context; restore the value of the model's published config.json",
    );
  }
  checkNumbers(get, file);
  const ropeScaling = get("rope_scaling");
  if (ropeScaling !== undefined) config.ropeScalingType = readRopeScalingType(ropeScaling);
  if (typeof torchDtype === "string") config.torchDtype = torchDtype;
  const quantization = top.quantization ?? get("quantization");
  const foreign = top.quantization_config ?? get("quantization_config");
  if (quantization === undefined && isObject(foreign) && typeof foreign.quant_method === "string") {
    throw new ShardctlError(
      "ModelNotMlx",
      `${file}: quantized with ${quoteText(foreign.quant_method)} (quantization_config), not MLX affine quantization — convert it with mlx_lm.convert`,
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
      throw bad(file, `${where}bits = ${quoteText(bits)}; MLX quantizes to ${quantizationBits.join(", ")} bits`);
    }
    if (typeof groupSize !== "number" || !quantizationGroupSizes.includes(groupSize)) {
      throw bad(file, `${where}group_size = ${quoteText(groupSize)}; MLX groups ${quantizationGroupSizes.join(", ")} weights`);
    }
    return { groupSize, bits };
  };
  const overrides: Array<[string, { groupSize: number; bits: number } | false]> = [];
  for (const [key, value] of Object.entries(raw)) {
    if (key === "bits" || key === "group_size" || key === "mode") continue;
    if (value === false) overrides.push([key, false]);
    else if (isObject(value)) overrides.push([key, read(value, `quantization[${quoteText(key)}].`)]);
  }
  // Keys are module paths the model names: fromEntries makes "__proto__" an entry, not the prototype.
  return { ...read(raw, "quantization."), mode: typeof raw.mode === "string" ? raw.mode : "affine", overrides: Object.fromEntries(overrides) };
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

/** The type `rope_scaling` names: `rope_type` (transformers' current key), else `type`; "" when neither is a string. */
function readRopeScalingType(raw: unknown): string {
  if (!isObject(raw)) return "";
  const type = raw.rope_type ?? raw.type;
  return typeof type === "string" ? type : "";
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/**
 * The model's numbers no engine computes with when they are not positive (a norm's epsilon, RoPE's
 * base, its scaling factors) or not of their type: every token would come out NaN or the engine
 * would refuse at load, after a launch. Absent ones take the engines' defaults.
 */
function checkNumbers(get: (key: string) => unknown, file: string): void {
  const positive = (value: unknown, name: string): void => {
    if (value === undefined || (typeof value === "number" && Number.isFinite(value) && value > 0)) return;
    throw bad(file, `${name} must be a positive number, got ${quoteText(value)}: no engine computes with it; restore the value of the model's published config.json`);
  };
  positive(get("rms_norm_eps"), "rms_norm_eps");
  positive(get("rope_theta"), "rope_theta");
  const tie = get("tie_word_embeddings");
  if (tie !== undefined && typeof tie !== "boolean") throw bad(file, `tie_word_embeddings must be true or false, got ${quoteText(tie)}`);
  const scaling = get("rope_scaling");
  if (!isObject(scaling)) return;
  for (const key of ["factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"]) {
    positive(Object.hasOwn(scaling, key) ? (scaling[key] ?? undefined) : undefined, `rope_scaling.${key}`);
  }
  const low = scaling.low_freq_factor;
  const high = scaling.high_freq_factor;
  if (typeof low === "number" && typeof high === "number" && high <= low) {
    throw bad(file, `rope_scaling.high_freq_factor (${high}) must exceed low_freq_factor (${low}): RoPE's scaling divides by their difference`);
  }
}
