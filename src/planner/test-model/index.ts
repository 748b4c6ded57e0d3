/**
 * make-test-model: a deterministic Llama- or Qwen2-family model in MLX format with random weights and
 * a real file layout (config.json, safetensors — sharded with an index when asked —, tokenizer.json,
 * tokenizer_config.json with a chat template). No model can be downloaded here, so tests, the demo
 * and the benchmarks use these. Both load in mlx-lm (`mlx_lm.load`); Qwen2 is the family whose
 * mlx-lm implementation can be split into a pipeline (`mlx_lm.server --pipeline`).
 */
import { mkdir, readdir, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { createRandom } from "./random.js";
import { type FloatDtype, dtypeBytes, encodeFloats, safetensorsDtype, torchDtype } from "./dtype.js";
import { type TensorData, writeSafetensors } from "./safetensors-writer.js";
import { type TestModelFamily, buildTokenizer, minimumVocab } from "./tokenizer.js";

export { writeSafetensors, type TensorData } from "./safetensors-writer.js";
export { encodeFloats, toFloat16Bits, toBfloat16Bits, type FloatDtype } from "./dtype.js";
export { type TestModelFamily, byteToUnicode, byteLevelTokenizerJson, specialToken } from "./tokenizer.js";

/** The families make-test-model writes. */
export const testModelFamilies: readonly TestModelFamily[] = ["llama", "qwen2"];

export interface TestModelOptions {
  /**
   * Architecture. Default "llama" (Llama 3: no attention biases, BOS token). "qwen2": biases on the
   * q/k/v projections, ChatML tokens and template, no BOS, and always a model.safetensors.index.json
   * (mlx-lm's pipeline loader reads it to pick each rank's files).
   */
  family?: TestModelFamily;
  /** Transformer layers. Default 4. */
  layers?: number;
  /** Hidden size. Default 64 (a multiple of the quantization group size 64 when quantized). */
  hidden?: number;
  /** Attention heads. Default 4. */
  heads?: number;
  /** Key/value heads (grouped-query attention). Default 2. */
  kvHeads?: number;
  /** MLP intermediate size. Default 2 × hidden, rounded up to a multiple of 64. */
  intermediate?: number;
  /** Vocabulary size, at least 261 (Llama) or 259 (Qwen2). Default 320. */
  vocab?: number;
  /** Weight dtype. Default f16. */
  dtype?: FloatDtype;
  /** MLX affine quantization bits (4 or 8), group size 64. Default none. */
  quantize?: 4 | 8;
  /** Number of safetensors files; more than 1 writes model.safetensors.index.json. Default 1. */
  shards?: number;
  /** PRNG seed. Default 0. */
  seed?: number;
  /** Tie lm_head to the embedding. Default false. */
  tieWordEmbeddings?: boolean;
  /** RoPE base. Default 500000 (Llama 3), 1000000 for Qwen2. */
  ropeTheta?: number;
  /** Add Llama-3.1 style rope_scaling (Llama only). Default false. */
  llama3RopeScaling?: boolean;
}

export interface TestModel {
  dir: string;
  /** Files written, relative to dir. */
  files: string[];
  /** The config.json written. */
  config: Record<string, unknown>;
  /** Sum of all tensor data bytes. */
  totalBytes: number;
}

const groupSize = 64;

/** Write a test model into `dir` (created if missing) and describe what was written. */
export async function makeTestModel(dir: string, options: TestModelOptions = {}): Promise<TestModel> {
  const o = normaliseOptions(options);
  const random = createRandom(o.seed);
  const tensors = buildTensors(o, random);
  await mkdir(dir, { recursive: true });
  // Weights of an earlier model in the same directory (another shard count, say) would be read as
  // part of this one: they go first.
  for (const name of await readdir(dir)) {
    if (name.endsWith(".safetensors") || name === "model.safetensors.index.json") await rm(join(dir, name));
  }

  const files: string[] = [];
  let totalBytes = 0;
  if (o.shards === 1 && o.family !== "qwen2") {
    totalBytes = await writeSafetensors(join(dir, "model.safetensors"), tensors);
    files.push("model.safetensors");
  } else {
    const weightMap: Record<string, string> = {};
    const groups = splitIntoShards(tensors, o.shards);
    for (const [i, group] of groups.entries()) {
      const name = groups.length === 1 ? "model.safetensors" : `model-${String(i + 1).padStart(5, "0")}-of-${String(groups.length).padStart(5, "0")}.safetensors`;
      totalBytes += await writeSafetensors(join(dir, name), group);
      for (const t of group) weightMap[t.name] = name;
      files.push(name);
    }
    const index = { metadata: { total_size: totalBytes }, weight_map: weightMap };
    await writeFile(join(dir, "model.safetensors.index.json"), JSON.stringify(index, null, 2) + "\n");
    files.push("model.safetensors.index.json");
  }

  const tokenizer = buildTokenizer(o.vocab, o.family);
  const config = o.family === "qwen2" ? qwen2Config(o, tokenizer) : llamaConfig(o, tokenizer);
  if (o.llama3RopeScaling) {
    config.rope_scaling = {
      rope_type: "llama3",
      factor: 8.0,
      low_freq_factor: 1.0,
      high_freq_factor: 4.0,
      original_max_position_embeddings: 1024,
    };
  }
  if (o.quantize !== undefined) config.quantization = { group_size: groupSize, bits: o.quantize };
  await writeJson(join(dir, "config.json"), config);
  await writeJson(join(dir, "tokenizer.json"), tokenizer.tokenizerJson);
  await writeJson(join(dir, "tokenizer_config.json"), tokenizer.tokenizerConfig);
  files.push("config.json", "tokenizer.json", "tokenizer_config.json");
  return { dir, files, config, totalBytes };
}

type Options = Required<Omit<TestModelOptions, "quantize">> & { quantize: 4 | 8 | undefined };

interface TokenIds {
  bosTokenId: number;
  eosTokenIds: number[];
}

/** Llama 3's config.json fields, as mlx-lm's llama module and Hugging Face's LlamaConfig read them. */
function llamaConfig(o: Options, tokenizer: TokenIds): Record<string, unknown> {
  return {
    architectures: ["LlamaForCausalLM"],
    model_type: "llama",
    hidden_size: o.hidden,
    intermediate_size: o.intermediate,
    num_hidden_layers: o.layers,
    num_attention_heads: o.heads,
    num_key_value_heads: o.kvHeads,
    head_dim: o.hidden / o.heads,
    vocab_size: o.vocab,
    rms_norm_eps: 1e-5,
    rope_theta: o.ropeTheta,
    max_position_embeddings: 8192,
    tie_word_embeddings: o.tieWordEmbeddings,
    torch_dtype: torchDtype[o.dtype],
    bos_token_id: tokenizer.bosTokenId,
    eos_token_id: tokenizer.eosTokenIds,
  };
}

/**
 * Qwen2's config.json fields, as Hugging Face's Qwen2Config writes them. mlx-lm's qwen2 module
 * derives the head dimension from hidden_size / num_attention_heads (there is no head_dim field) and
 * defaults tie_word_embeddings to true, so it is always written.
 */
function qwen2Config(o: Options, tokenizer: TokenIds): Record<string, unknown> {
  return {
    architectures: ["Qwen2ForCausalLM"],
    model_type: "qwen2",
    hidden_size: o.hidden,
    intermediate_size: o.intermediate,
    num_hidden_layers: o.layers,
    num_attention_heads: o.heads,
    num_key_value_heads: o.kvHeads,
    vocab_size: o.vocab,
    hidden_act: "silu",
    rms_norm_eps: 1e-6,
    rope_theta: o.ropeTheta,
    max_position_embeddings: 32768,
    use_sliding_window: false,
    sliding_window: 32768,
    max_window_layers: o.layers,
    attention_dropout: 0.0,
    tie_word_embeddings: o.tieWordEmbeddings,
    torch_dtype: torchDtype[o.dtype],
    bos_token_id: tokenizer.bosTokenId,
    eos_token_id: tokenizer.eosTokenIds,
  };
}

function normaliseOptions(options: TestModelOptions): Options {
  const hidden = options.hidden ?? 64;
  const family = options.family ?? "llama";
  if (!testModelFamilies.includes(family)) throw new RangeError(`family must be one of ${testModelFamilies.join(", ")}, got ${String(family)}`);
  const o: Options = {
    family,
    layers: options.layers ?? 4,
    hidden,
    heads: options.heads ?? 4,
    kvHeads: options.kvHeads ?? 2,
    intermediate: options.intermediate ?? Math.ceil((2 * hidden) / 64) * 64,
    vocab: options.vocab ?? 320,
    dtype: options.dtype ?? "f16",
    quantize: options.quantize,
    shards: options.shards ?? 1,
    seed: options.seed ?? 0,
    tieWordEmbeddings: options.tieWordEmbeddings ?? false,
    ropeTheta: options.ropeTheta ?? (family === "qwen2" ? 1_000_000 : 500_000),
    llama3RopeScaling: options.llama3RopeScaling ?? false,
  };
  const positive = ["layers", "hidden", "heads", "kvHeads", "intermediate", "vocab", "shards"] as const;
  for (const key of positive) {
    if (!Number.isInteger(o[key]) || o[key] < 1) throw new RangeError(`${key} must be a positive integer, got ${o[key]}`);
  }
  if (o.hidden % o.heads !== 0) throw new RangeError(`hidden (${o.hidden}) must be a multiple of heads (${o.heads})`);
  if (o.heads % o.kvHeads !== 0) throw new RangeError(`heads (${o.heads}) must be a multiple of kv-heads (${o.kvHeads})`);
  if (o.vocab < minimumVocab(o.family)) throw new RangeError(`vocab must be at least ${minimumVocab(o.family)}, got ${o.vocab}`);
  if (o.family !== "llama" && o.llama3RopeScaling) throw new RangeError(`Llama 3 rope scaling is for the llama family, not ${o.family}`);
  if ((o.hidden / o.heads) % 2 !== 0) throw new RangeError(`head dimension (${o.hidden / o.heads}) must be even for rotary embeddings`);
  if (o.quantize !== undefined && (o.hidden % groupSize !== 0 || o.intermediate % groupSize !== 0)) {
    throw new RangeError(`quantized models need hidden and intermediate sizes that are multiples of ${groupSize}`);
  }
  return o;
}

/** Tensors in file order: embedding, layers 0..L-1, final norm, lm_head. */
function buildTensors(o: Options, random: () => number): TensorData[] {
  const headDim = o.hidden / o.heads;
  const tensors: TensorData[] = [];
  const linear = (name: string, out: number, inDim: number): void => {
    tensors.push(...makeLinear(name, out, inDim, o, random));
  };
  // Qwen2's q/k/v projections carry a bias: a float vector even in a quantized model.
  const bias = (name: string, size: number): void => {
    const values = new Float32Array(size);
    for (let i = 0; i < values.length; i++) values[i] = (random() - 0.5) * 0.2;
    tensors.push({ name, dtype: safetensorsDtype[o.dtype], shape: [size], data: encodeFloats(values, o.dtype) });
  };
  const norm = (name: string): void => {
    const values = new Float32Array(o.hidden);
    for (let i = 0; i < values.length; i++) values[i] = 1 + (random() - 0.5) * 0.2;
    tensors.push({ name, dtype: safetensorsDtype[o.dtype], shape: [o.hidden], data: encodeFloats(values, o.dtype) });
  };

  linear("model.embed_tokens", o.vocab, o.hidden);
  for (let l = 0; l < o.layers; l++) {
    const p = `model.layers.${l}`;
    norm(`${p}.input_layernorm.weight`);
    linear(`${p}.self_attn.q_proj`, o.heads * headDim, o.hidden);
    if (o.family === "qwen2") bias(`${p}.self_attn.q_proj.bias`, o.heads * headDim);
    linear(`${p}.self_attn.k_proj`, o.kvHeads * headDim, o.hidden);
    if (o.family === "qwen2") bias(`${p}.self_attn.k_proj.bias`, o.kvHeads * headDim);
    linear(`${p}.self_attn.v_proj`, o.kvHeads * headDim, o.hidden);
    if (o.family === "qwen2") bias(`${p}.self_attn.v_proj.bias`, o.kvHeads * headDim);
    linear(`${p}.self_attn.o_proj`, o.hidden, o.heads * headDim);
    norm(`${p}.post_attention_layernorm.weight`);
    linear(`${p}.mlp.gate_proj`, o.intermediate, o.hidden);
    linear(`${p}.mlp.up_proj`, o.intermediate, o.hidden);
    linear(`${p}.mlp.down_proj`, o.hidden, o.intermediate);
  }
  norm("model.norm.weight");
  if (!o.tieWordEmbeddings) linear("lm_head", o.vocab, o.hidden);
  return tensors;
}

/**
 * A linear (or embedding) module `[out, in]`: a float `weight`, or, when quantized, MLX's affine
 * layout — `weight` uint32 `[out, in*bits/32]` packing the lowest bits first, `scales` and
 * `biases` `[out, in/64]` in the model dtype, value = scale * q + bias.
 */
function makeLinear(prefix: string, out: number, inDim: number, o: Options, random: () => number): TensorData[] {
  const amplitude = Math.sqrt(3 / inDim);
  const dtype = safetensorsDtype[o.dtype];
  if (o.quantize === undefined) {
    const values = new Float32Array(out * inDim);
    for (let i = 0; i < values.length; i++) values[i] = (random() * 2 - 1) * amplitude;
    return [{ name: `${prefix}.weight`, dtype, shape: [out, inDim], data: encodeFloats(values, o.dtype) }];
  }
  const bits = o.quantize;
  const perWord = 32 / bits;
  const levels = (1 << bits) - 1;
  const packed = new Uint32Array((out * inDim) / perWord);
  for (let i = 0; i < packed.length; i++) {
    let word = 0;
    for (let k = 0; k < perWord; k++) word |= Math.floor(random() * (levels + 1)) << (k * bits);
    packed[i] = word >>> 0;
  }
  const groups = out * (inDim / groupSize);
  const scales = new Float32Array(groups);
  const biases = new Float32Array(groups);
  for (let g = 0; g < groups; g++) {
    const scale = ((2 * amplitude) / levels) * (0.75 + random() * 0.5);
    scales[g] = scale;
    biases[g] = -scale * (levels / 2) + (random() - 0.5) * scale;
  }
  return [
    { name: `${prefix}.weight`, dtype: "U32", shape: [out, (inDim * bits) / 32], data: Buffer.from(packed.buffer) },
    { name: `${prefix}.scales`, dtype, shape: [out, inDim / groupSize], data: encodeFloats(scales, o.dtype) },
    { name: `${prefix}.biases`, dtype, shape: [out, inDim / groupSize], data: encodeFloats(biases, o.dtype) },
  ];
}

/** Split tensors, in order, into `shards` groups of roughly equal bytes (never an empty group). */
function splitIntoShards(tensors: TensorData[], shards: number): TensorData[][] {
  const count = Math.min(shards, tensors.length);
  const total = tensors.reduce((sum, t) => sum + t.data.length, 0);
  const groups: TensorData[][] = [];
  let current: TensorData[] = [];
  let done = 0;
  for (const [i, tensor] of tensors.entries()) {
    current.push(tensor);
    done += tensor.data.length;
    const remainingTensors = tensors.length - i - 1;
    const remainingGroups = count - groups.length - 1;
    const target = (total * (groups.length + 1)) / count;
    if (remainingGroups > 0 && (done >= target || remainingTensors === remainingGroups)) {
      groups.push(current);
      current = [];
    }
  }
  groups.push(current);
  return groups;
}

async function writeJson(file: string, value: unknown): Promise<void> {
  await writeFile(file, JSON.stringify(value, null, 2) + "\n");
}

/** Bytes per element of a float dtype. */
export { dtypeBytes };
