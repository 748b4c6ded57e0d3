/**
 * Tensor views in their stored format: 16-bit floats stay Uint16Array (widened through a lookup
 * table when used), f32 stays Float32Array, MLX-quantized linears stay packed uint32 words with
 * their per-group scales and biases.
 */
import { bf16Table, f16Table } from "./float-tables.js";
import { readTensorBytes, type TensorEntry, type TensorIndex } from "./safetensors.js";

/** A float vector or matrix in its stored dtype. */
export type FloatData = { kind: "f32"; data: Float32Array } | { kind: "half"; data: Uint16Array; table: Float32Array };

/** A linear map `[out, in]` (also used for embeddings, row = token). */
export type Linear =
  | { kind: "float"; out: number; in: number; weight: FloatData }
  | {
      kind: "quantized";
      out: number;
      in: number;
      bits: 4 | 8;
      groupSize: number;
      packed: Uint32Array;
      scales: FloatData;
      biases: FloatData;
    };

/** Read a float tensor as stored. */
export function loadFloat(entry: TensorEntry): FloatData {
  const bytes = readTensorBytes(entry);
  switch (entry.dtype) {
    case "F32":
      return { kind: "f32", data: new Float32Array(bytes) };
    case "F16":
      return { kind: "half", data: new Uint16Array(bytes), table: f16Table };
    case "BF16":
      return { kind: "half", data: new Uint16Array(bytes), table: bf16Table };
    default:
      throw new Error(`tensor ${entry.name}: unsupported dtype ${entry.dtype}`);
  }
}

/** Widen a (small) float tensor to f32, e.g. norm weights. */
export function toFloat32(data: FloatData): Float32Array {
  if (data.kind === "f32") return data.data;
  const out = new Float32Array(data.data.length);
  for (let i = 0; i < out.length; i++) out[i] = data.table[data.data[i] as number] as number;
  return out;
}

/** Element `i` of a float tensor as a number. */
export function floatAt(data: FloatData, i: number): number {
  return data.kind === "f32" ? (data.data[i] as number) : (data.table[data.data[i] as number] as number);
}

/**
 * Load the linear module `prefix` (`prefix.weight`, plus `.scales`/`.biases` when quantized).
 * `groupSize` is the configured quantization group size (MLX default 64).
 */
export function loadLinear(tensors: TensorIndex, prefix: string, groupSize: number | undefined): Linear {
  const weight = requireEntry(tensors, `${prefix}.weight`);
  const scalesEntry = tensors.get(`${prefix}.scales`);
  const [out, cols] = weight.shape;
  if (out === undefined || cols === undefined) throw new Error(`tensor ${weight.name}: expected 2 dimensions`);
  if (scalesEntry === undefined) return { kind: "float", out, in: cols, weight: loadFloat(weight) };
  if (weight.dtype !== "U32") throw new Error(`tensor ${weight.name}: quantized weights must be U32, got ${weight.dtype}`);
  const groups = scalesEntry.shape[1];
  if (groups === undefined || groupSize === undefined) throw new Error(`tensor ${prefix}: quantized but no group size known`);
  const inDim = groups * groupSize;
  const bits = (cols * 32) / inDim;
  if (bits !== 4 && bits !== 8) throw new Error(`tensor ${prefix}: ${bits}-bit quantization is not supported (4 or 8)`);
  return {
    kind: "quantized",
    out,
    in: inDim,
    bits,
    groupSize,
    packed: new Uint32Array(readTensorBytes(weight)),
    scales: loadFloat(scalesEntry),
    biases: loadFloat(requireEntry(tensors, `${prefix}.biases`)),
  };
}

export function requireEntry(tensors: TensorIndex, name: string): TensorEntry {
  const entry = tensors.get(name);
  if (entry === undefined) throw new Error(`tensor ${name} is missing from the model`);
  return entry;
}

/** Bytes a linear module holds in memory. */
export function linearBytes(linear: Linear): number {
  if (linear.kind === "float") return linear.weight.data.byteLength;
  return linear.packed.byteLength + linear.scales.data.byteLength + linear.biases.data.byteLength;
}
