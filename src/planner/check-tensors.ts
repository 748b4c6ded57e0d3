/**
 * The weights must be the model config.json describes. The plan sizes stages from the headers and
 * the KV cache from config.json, and the engine builds its layers from config.json and then loads
 * the tensors into them: a tensor whose shape disagrees, one the family does not have (MoE experts
 * in a model declared llama) or one that is missing only fails on the nodes, after staging and a
 * launch. So inspection refuses such a model up front, naming the tensor and what was expected.
 *
 * Checked for the families whose layout is fixed and known here (llama, mistral: the families the
 * engines validate). Other families are planned only on request and keep their own layouts; their
 * tensors are not judged by these rules.
 */
import { quoteText, ShardctlError, type PlannerReason } from "../errors/index.js";
import type { ModelConfig, Quantization } from "./model-config.js";
import type { HeaderFile, ModelProfile } from "./model-profile.js";
import type { TensorEntry } from "./safetensors-header.js";

/** Families with the Llama layout: per layer one attention (q, k, v, o) and one gated MLP (gate, up, down). */
const llamaLayoutFamilies = new Set(["llama", "mistral"]);

/** Names that only mixture-of-experts models have, for a message that says what the model really is. */
const moePattern = /(?:^|\.)(?:experts|switch_mlp|block_sparse_moe|shared_experts?|moe|router)(?:\.|$)|\.mlp\.gate\./;

/** A linear (or embedding) module of the layout: its [out, in] from config.json. `undefined` is a dimension config.json does not state. */
type Linear = { kind: "linear"; out: number | undefined; in: number };
type Norm = { kind: "norm"; size: number };
type RotaryFrequencies = { kind: "rotary"; size: number };
type ModuleShape = Linear | Norm | RotaryFrequencies;

function fail(reason: PlannerReason, message: string): ShardctlError {
  return new ShardctlError(reason, message, { terminal: true });
}

/**
 * Throws `ModelTensorUnexpected`, `ModelTensorMissing` or `ModelTensorShapeMismatch` (terminal)
 * when the tensors of a llama-layout model disagree with its config.json; does nothing for other
 * families. `profile` is what buildModelProfile made of the same headers (layer count already
 * cross-checked there).
 */
export function checkModelTensors(profile: ModelProfile, headers: readonly HeaderFile[]): void {
  if (!llamaLayoutFamilies.has(profile.family)) return;
  const { config, tensorPrefix: prefix, source } = profile;
  const layout = llamaLayout(config);

  // Group the tensors by module: "model.layers.0.self_attn.q_proj" → weight, scales, biases, bias.
  const modules = new Map<string, Map<string, { tensor: TensorEntry; file: string }>>();
  for (const { path, header } of headers) {
    for (const tensor of header.tensors) {
      if (!tensor.name.startsWith(prefix)) continue;
      const name = tensor.name.slice(prefix.length);
      const modulePath = name.slice(0, name.lastIndexOf("."));
      const inLanguageModel = name.startsWith("model.") || name.startsWith("lm_head.");
      if (!inLanguageModel) continue; // a vision tower or the like: never placed on a stage, not judged here
      if (layout.shapeOf(modulePath) === undefined) throw unexpected(source, path, tensor.name, config.modelType);
      const parts = modules.get(modulePath) ?? new Map<string, { tensor: TensorEntry; file: string }>();
      parts.set(name.slice(modulePath.length + 1), { tensor, file: path });
      modules.set(modulePath, parts);
    }
  }

  // Every module the family needs is there, and holds the parts its kind has.
  for (const modulePath of layout.required) {
    if (!modules.has(modulePath)) {
      throw fail("ModelTensorMissing", `${source}: no tensor ${prefix}${modulePath}.weight, which every ${config.modelType} model has — the weights are incomplete`);
    }
  }
  for (const [modulePath, parts] of modules) {
    checkModule(source, prefix, modulePath, layout.shapeOf(modulePath)!, parts, config);
  }
}

/** The Llama layout for this config: which module paths exist, their shapes, which are required. */
function llamaLayout(config: ModelConfig): { shapeOf(modulePath: string): ModuleShape | undefined; required: string[] } {
  const { hiddenSize: hidden, heads, kvHeads, headDim, vocabSize: vocab, intermediateSize: intermediate, layers } = config;
  // Maps, not object literals: the module paths looked up come from the tensor names, and
  // "model.layers.0.constructor" must not find Object.prototype's constructor.
  const perLayer = new Map<string, ModuleShape>([
    ["input_layernorm", { kind: "norm", size: hidden }],
    ["post_attention_layernorm", { kind: "norm", size: hidden }],
    ["self_attn.q_proj", { kind: "linear", out: heads * headDim, in: hidden }],
    ["self_attn.k_proj", { kind: "linear", out: kvHeads * headDim, in: hidden }],
    ["self_attn.v_proj", { kind: "linear", out: kvHeads * headDim, in: hidden }],
    ["self_attn.o_proj", { kind: "linear", out: hidden, in: heads * headDim }],
    ["mlp.gate_proj", { kind: "linear", out: intermediate, in: hidden }],
    ["mlp.up_proj", { kind: "linear", out: intermediate, in: hidden }],
    // Without intermediate_size in config.json the MLP's inner dimension is not checked (NaN matches any size).
    ["mlp.down_proj", { kind: "linear", out: hidden, in: intermediate ?? Number.NaN }],
    // Older checkpoints carry the rotary frequencies; loaders recompute and drop them.
    ["self_attn.rotary_emb", { kind: "rotary", size: headDim / 2 }],
  ]);
  const global = new Map<string, ModuleShape>([
    ["model.embed_tokens", { kind: "linear", out: vocab, in: hidden }],
    ["model.norm", { kind: "norm", size: hidden }],
    ["lm_head", { kind: "linear", out: vocab, in: hidden }],
  ]);
  const required = ["model.embed_tokens", "model.norm", ...(config.tieWordEmbeddings ? [] : ["lm_head"])];
  for (let layer = 0; layer < layers; layer++) {
    for (const key of perLayer.keys()) if (key !== "self_attn.rotary_emb") required.push(`model.layers.${layer}.${key}`);
  }
  return {
    required,
    shapeOf: (modulePath) => {
      const inLayer = /^model\.layers\.(\d+)\.(.+)$/.exec(modulePath);
      if (inLayer === null) return global.get(modulePath);
      return Number(inLayer[1]) < layers ? perLayer.get(inLayer[2]!) : undefined;
    },
  };
}

/** One module's parts against its shape: float or MLX-quantized weight, scales, biases, bias. */
function checkModule(
  source: string,
  prefix: string,
  modulePath: string,
  shape: ModuleShape,
  parts: Map<string, { tensor: TensorEntry; file: string }>,
  config: ModelConfig,
): void {
  const full = `${prefix}${modulePath}`;
  const mismatch = (part: string, expected: string, why: string): ShardctlError => {
    const { tensor, file } = parts.get(part)!;
    return fail(
      "ModelTensorShapeMismatch",
      `${source}/${file}: tensor ${quoteText(`${full}.${part}`)} is ${tensor.dtype} [${tensor.shape.join(", ")}] but config.json (${why}) gives ${expected} — the weights are not the model config.json describes`,
    );
  };
  const allowedParts = shape.kind === "linear" ? ["weight", "scales", "biases", "bias"] : shape.kind === "norm" ? ["weight"] : ["inv_freq"];
  for (const part of parts.keys()) {
    if (!allowedParts.includes(part)) throw unexpected(source, parts.get(part)!.file, `${full}.${part}`, config.modelType);
  }

  if (shape.kind !== "linear") {
    const part = shape.kind === "norm" ? "weight" : "inv_freq";
    const entry = parts.get(part);
    if (entry === undefined) throw fail("ModelTensorMissing", `${source}: no tensor ${full}.${part}`);
    if (!sameShape(entry.tensor.shape, [shape.size])) {
      throw mismatch(part, `[${shape.size}]`, shape.kind === "norm" ? `hidden_size ${config.hiddenSize}` : `head_dim ${config.headDim} / 2`);
    }
    return;
  }

  const weight = parts.get("weight");
  if (weight === undefined) throw fail("ModelTensorMissing", `${source}: ${full} has ${[...parts.keys()].join(", ")} but no weight`);
  const why = describeLinear(modulePath, config);
  // A module is quantized when its weights carry scales (as MLX's loader decides); config.json says how.
  const quantized = parts.has("scales") || weight.tensor.dtype === "U32";
  const outDims = shape.out;
  if (!quantized) {
    if (!sameShape(weight.tensor.shape, [outDims, shape.in])) throw mismatch("weight", `[${outDims ?? "any"}, ${shape.in}]`, why);
  } else {
    const params = quantizationOf(config.quantization, full, modulePath);
    if (params === undefined) {
      throw fail(
        "ModelTensorShapeMismatch",
        `${source}/${weight.file}: ${full} is MLX-quantized (${parts.has("scales") ? "it has scales" : "its weight is U32"}) but config.json ${config.quantization === undefined ? "has no quantization" : `leaves ${full} unquantized`}`,
      );
    }
    const { bits, groupSize } = params;
    if (weight.tensor.dtype !== "U32") throw mismatch("weight", `U32 (${bits}-bit packed)`, `quantization bits ${bits}`);
    const packed = (shape.in * bits) / 32;
    if (!sameShape(weight.tensor.shape, [outDims, packed])) {
      throw mismatch(
        "weight",
        `[${outDims ?? "any"}, ${Number.isInteger(packed) ? packed : `${shape.in} × ${bits} / 32`}] (${bits}-bit packed into uint32)`,
        `${why}, ${bits} bits`,
      );
    }
    for (const part of ["scales", "biases"]) {
      const entry = parts.get(part);
      // Affine quantization stores a bias per group; MLX's other modes (mxfp4, …) only scales.
      if (entry === undefined) {
        if (part === "scales" || config.quantization?.mode === "affine") throw fail("ModelTensorMissing", `${source}: no tensor ${full}.${part} for quantized ${full}`);
        continue;
      }
      const groups = shape.in / groupSize;
      if (!sameShape(entry.tensor.shape, [outDims, groups])) {
        throw mismatch(part, `[${outDims ?? "any"}, ${Number.isInteger(groups) ? groups : `${shape.in} / ${groupSize}`}]`, `${why}, group_size ${groupSize}`);
      }
    }
  }
  const bias = parts.get("bias");
  if (bias !== undefined && outDims !== undefined && !sameShape(bias.tensor.shape, [outDims])) throw mismatch("bias", `[${outDims}]`, why);
}

/** The bits and group size of a quantized module: its own entry in config.json's quantization, else the default. */
function quantizationOf(quantization: Quantization | undefined, fullPath: string, modulePath: string): { bits: number; groupSize: number } | undefined {
  if (quantization === undefined) return undefined;
  const { overrides } = quantization;
  const own = Object.hasOwn(overrides, fullPath) ? overrides[fullPath] : Object.hasOwn(overrides, modulePath) ? overrides[modulePath] : undefined;
  if (own === false) return undefined;
  return own ?? { bits: quantization.bits, groupSize: quantization.groupSize };
}

/** Which config.json fields a linear module's shape comes from, for messages. */
function describeLinear(modulePath: string, config: ModelConfig): string {
  const { hiddenSize, heads, kvHeads, headDim, vocabSize, intermediateSize } = config;
  if (modulePath === "model.embed_tokens" || modulePath === "lm_head") return `vocab_size ${vocabSize} × hidden_size ${hiddenSize}`;
  if (/q_proj$|o_proj$/.test(modulePath)) return `num_attention_heads ${heads} × head_dim ${headDim}, hidden_size ${hiddenSize}`;
  if (/[kv]_proj$/.test(modulePath)) return `num_key_value_heads ${kvHeads} × head_dim ${headDim}, hidden_size ${hiddenSize}`;
  return `intermediate_size ${intermediateSize ?? "unset"}, hidden_size ${hiddenSize}`;
}

/** `expected` entries that are undefined or NaN match any size (config.json does not state them). */
function sameShape(actual: readonly number[], expected: ReadonlyArray<number | undefined>): boolean {
  return actual.length === expected.length && expected.every((size, i) => size === undefined || Number.isNaN(size) || actual[i] === size);
}

function unexpected(source: string, file: string, name: string, modelType: string): ShardctlError {
  const moe = moePattern.test(name);
  const what = moe
    ? `a mixture-of-experts tensor, but config.json declares model_type ${quoteText(modelType)}, a dense model — set model_type to the model's real family (e.g. "mixtral") or use this model's own weights`
    : `not a tensor of the ${modelType} layout (per layer: input_layernorm, self_attn.{q,k,v,o}_proj, post_attention_layernorm, mlp.{gate,up,down}_proj)`;
  return fail("ModelTensorUnexpected", `${source}/${file}: tensor ${quoteText(name)} is ${what}`);
}
