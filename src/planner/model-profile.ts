import { quoteText, ShardctlError, type PlannerReason } from "../errors/index.js";
import type { ModelConfig } from "./model-config.js";
import type { SafetensorsHeader } from "./safetensors-header.js";

/** One safetensors file of a model and what it holds. */
export interface ModelFile {
  /** Path relative to the model directory / repository root. */
  path: string;
  /** The file's size (bytes); 8 + header + covered data when the reader did not report it. */
  sizeBytes: number;
  /** JSON header length N (bytes). */
  headerBytes: number;
  /** Transformer layer indices with at least one tensor in this file, ascending. */
  layers: number[];
  /** Holds (part of) `model.embed_tokens`. */
  embedding: boolean;
  /** Holds (part of) the final norm `model.norm`. */
  norm: boolean;
  /** Holds (part of) `lm_head`. */
  lmHead: boolean;
  /** Holds tensors outside the language model (e.g. a vision tower); the planner ignores them. */
  other: boolean;
  /** Tensor names, in data-buffer order. */
  tensors: string[];
}

/** Everything the planner knows about a model, from config.json and safetensors headers only. */
export interface ModelProfile {
  /** Where it was read from, for messages ("/models/llama" or "hub:org/name@main"). */
  source: string;
  config: ModelConfig;
  /** config.model_type, lower case (the family the gates check). */
  family: string;
  layers: number;
  /** Exact tensor bytes of each layer `model.layers.{i}.*` (MLX scales/biases included). */
  layerBytes: number[];
  /** `model.embed_tokens.*` bytes (needed on the first stage, and on the last when tied). */
  embeddingBytes: number;
  /** `model.norm.*` bytes (last stage). */
  normBytes: number;
  /** `lm_head.*` bytes (last stage; 0 when tied). */
  lmHeadBytes: number;
  /** Bytes of tensors outside the language model (on no stage; on every stage of an engine whose ranks keep them). */
  otherBytes: number;
  /** Sum of every tensor's bytes. */
  totalBytes: number;
  /** Float dtype of the weights (of the scales when quantized), safetensors name e.g. "BF16". */
  dtype: string;
  /** Bytes per KV-cache element: the model dtype's size (2 for F16/BF16, 4 for F32). */
  kvBytesPerElement: number;
  /**
   * Each dtype the stages' tensors are stored in (layers, embedding, final norm, lm_head; MLX-packed
   * quantized weights, the U32 `.weight` beside `.scales`, apart), with the first tensor found in it:
   * an engine that loads only some dtypes names one it cannot.
   */
  dtypes: StoredDtype[];
  /** Tensor name prefix before `model.` (e.g. "language_model."), usually "". */
  tensorPrefix: string;
  files: ModelFile[];
  /** Whether model.safetensors.index.json maps the tensors to their files (a single model.safetensors has none). */
  indexed: boolean;
  /**
   * Whether the model has a tokenizer beside config.json (`tokenizer.json`, or SentencePiece's
   * `tokenizer.model`): every engine needs one to turn a prompt into tokens. Undefined when the
   * source was not listed (a Hub branch not pinned for staging: such a plan reads only its config and headers).
   */
  tokenizer?: "present" | "missing";
}

/** A dtype the stages' tensors are stored in, and the first tensor stored in it. */
export interface StoredDtype {
  dtype: string;
  /** The file holding `tensor`, relative to the model root. */
  file: string;
  tensor: string;
}

/** A file's parsed header, as read by a source. */
export interface HeaderFile {
  path: string;
  header: SafetensorsHeader;
  /** The file's real size (bytes), when the reader knows it. */
  fileSize?: number;
}

const layerPattern = /^((?:language_model\.)?)model\.layers\.(\d+)\./;
const unindexedLayerPattern = /^(?:language_model\.)?model\.layers\.(?!\d+\.)/;
const embeddingPattern = /^((?:language_model\.)?)model\.embed_tokens\./;
const normPattern = /^((?:language_model\.)?)model\.norm\./;
const lmHeadPattern = /^((?:language_model\.)?)lm_head\./;
// Layer naming of other formats: GPT-2/NeoX style PyTorch checkpoints, GGUF, encoder-decoders.
const foreignLayerPattern = /(?:^|\.)(?:h|blocks|blk|layer|layers)\.\d+\./;

// Maps, not object literals: the keys come from the model (a tensor's dtype, config.json's
// torch_dtype), and "constructor" must not find Object.prototype's.
const floatBytes = new Map([
  ["F16", 2],
  ["BF16", 2],
  ["F32", 4],
  ["F64", 8],
]);
const torchDtypes = new Map([
  ["float16", "F16"],
  ["bfloat16", "BF16"],
  ["float32", "F32"],
]);

function fail(reason: PlannerReason, message: string): ShardctlError {
  return new ShardctlError(reason, message, { terminal: true });
}

/**
 * Build the profile from config.json and the headers of every safetensors file. `weightMap` is the
 * index's tensor → file map when the model is sharded; it must agree with the headers.
 */
export function buildModelProfile(source: string, config: ModelConfig, headers: readonly HeaderFile[], weightMap?: ReadonlyMap<string, string>): ModelProfile {
  const layerBytes = new Array<number>(config.layers).fill(0);
  const found = new Set<number>();
  const prefixes = new Set<string>();
  let embeddingBytes = 0;
  let normBytes = 0;
  let lmHeadBytes = 0;
  let otherBytes = 0;
  let totalBytes = 0;
  const foreign: string[] = [];
  const dtypeBytes = new Map<string, number>();
  let scalesDtype: string | undefined;
  const files: ModelFile[] = [];
  const dtypes = new Map<string, StoredDtype>();
  // A module with scales is MLX-quantized: its `.weight` holds packed integers, not values of a dtype.
  const packed = new Set(
    headers.flatMap(({ header }) => header.tensors.filter((t) => t.name.endsWith(".scales")).map((t) => `${t.name.slice(0, -".scales".length)}.weight`)),
  );

  for (const { path, header, fileSize } of headers) {
    const file: ModelFile = {
      path,
      sizeBytes: fileSize ?? 8 + header.headerBytes + header.dataBytes,
      headerBytes: header.headerBytes,
      layers: [],
      embedding: false,
      norm: false,
      lmHead: false,
      other: false,
      tensors: [],
    };
    const fileLayers = new Set<number>();
    for (const t of header.tensors) {
      const bytes = t.end - t.begin;
      totalBytes += bytes;
      file.tensors.push(t.name);
      if (weightMap !== undefined && weightMap.get(t.name) !== path) {
        throw fail(
          "ModelIndexInvalid",
          `model.safetensors.index.json: tensor ${quoteText(t.name)} is in ${path} but the weight_map says ${weightMap.get(t.name) ?? "nothing"}`,
        );
      }
      if (floatBytes.has(t.dtype)) dtypeBytes.set(t.dtype, (dtypeBytes.get(t.dtype) ?? 0) + bytes);
      if (t.name.endsWith(".scales")) scalesDtype ??= t.dtype;
      const layer = layerPattern.exec(t.name);
      const staged = layer !== null || embeddingPattern.test(t.name) || normPattern.test(t.name) || lmHeadPattern.test(t.name);
      if (staged && !packed.has(t.name) && !dtypes.has(t.dtype)) dtypes.set(t.dtype, { dtype: t.dtype, file: path, tensor: t.name });
      if (layer !== null) {
        const index = Number(layer[2]);
        prefixes.add(layer[1] ?? "");
        found.add(index);
        fileLayers.add(index);
        if (index < config.layers) layerBytes[index] = (layerBytes[index] ?? 0) + bytes;
      } else if (unindexedLayerPattern.test(t.name)) {
        throw fail("ModelLayerIndexMissing", `${path}: tensor ${quoteText(t.name)} has no layer index (expected model.layers.<n>.…)`);
      } else if (embeddingPattern.test(t.name)) {
        embeddingBytes += bytes;
        file.embedding = true;
      } else if (normPattern.test(t.name)) {
        normBytes += bytes;
        file.norm = true;
      } else if (lmHeadPattern.test(t.name)) {
        lmHeadBytes += bytes;
        file.lmHead = true;
      } else {
        if (foreignLayerPattern.test(t.name)) foreign.push(`${path}: ${t.name}`);
        otherBytes += bytes;
        file.other = true;
      }
    }
    file.layers = [...fileLayers].sort((a, b) => a - b);
    files.push(file);
  }

  if (weightMap !== undefined) {
    const listed = new Set(headers.flatMap((h) => h.header.tensors.map((t) => t.name)));
    const missing = [...weightMap.keys()].find((name) => !listed.has(name));
    if (missing !== undefined) {
      throw fail(
        "ModelIndexInvalid",
        `model.safetensors.index.json: tensor ${quoteText(missing)} is mapped to ${weightMap.get(missing)} but that file's header does not hold it`,
      );
    }
  }
  if (found.size === 0) {
    const hint = foreign.length > 0 ? `; found PyTorch/GGUF-style names such as ${quoteText(foreign[0])}` : "";
    throw fail("ModelNotMlx", `${source}: no tensor named model.layers.<n>.* — not an MLX-format Llama-style model${hint}`);
  }
  const missingLayers = [...Array(config.layers).keys()].filter((i) => !found.has(i));
  const extraLayers = [...found].filter((i) => i >= config.layers).sort((a, b) => a - b);
  if (missingLayers.length > 0 || extraLayers.length > 0) {
    throw fail(
      "ModelLayerCountMismatch",
      `${source}: config.json says num_hidden_layers = ${config.layers} but the safetensors hold ${found.size} layer indices` +
        (missingLayers.length > 0 ? ` (missing ${listIndices(missingLayers)})` : "") +
        (extraLayers.length > 0 ? ` (beyond the count: ${listIndices(extraLayers)})` : ""),
    );
  }
  if (embeddingBytes === 0) throw fail("ModelNotMlx", `${source}: no model.embed_tokens tensor found`);
  if (prefixes.size > 1) throw fail("ModelNotMlx", `${source}: layer tensors use mixed prefixes (${[...prefixes].map((p) => `"${p}model.layers"`).join(", ")})`);

  const dtype = scalesDtype ?? mostBytes(dtypeBytes) ?? torchDtypes.get(config.torchDtype ?? "") ?? "F16";
  return {
    source,
    config,
    family: config.modelType.toLowerCase(),
    layers: config.layers,
    layerBytes,
    embeddingBytes,
    normBytes,
    lmHeadBytes,
    otherBytes,
    totalBytes,
    dtype,
    kvBytesPerElement: floatBytes.get(dtype) ?? 2,
    dtypes: [...dtypes.values()],
    tensorPrefix: [...prefixes][0] ?? "",
    indexed: weightMap !== undefined,
    files,
  };
}

function mostBytes(counts: Map<string, number>): string | undefined {
  let best: string | undefined;
  let bestBytes = -1;
  for (const [k, v] of counts) {
    if (v > bestBytes) {
      best = k;
      bestBytes = v;
    }
  }
  return best;
}

function listIndices(indices: number[]): string {
  const shown = indices.slice(0, 8).join(", ");
  return indices.length > 8 ? `${shown}, … ${indices.length} in all` : shown;
}
