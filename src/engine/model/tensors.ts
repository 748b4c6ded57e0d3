/**
 * Tensors in their stored format: a linear module's weights are read straight into a kernel arena
 * (16-bit floats stay 16-bit, MLX-quantized weights stay packed with their per-group scales and
 * biases); only the small norm vectors are widened to f32.
 */
import { Arena, type FloatKind, type KernelRuntime, type LinearWeights, moveHalfSpecials } from "../kernels/index.js";
import { bf16Table, f16Table } from "./float-tables.js";
import { readTensorBytes, readTensorInto, type TensorEntry, type TensorIndex } from "./safetensors.js";

/** The largest quantization group the kernels sum exactly (see assembly/quant.ts). */
const maxGroupSize = 1024;

const floatKinds: Record<string, FloatKind> = { F32: "f32", F16: "f16", BF16: "bf16" };

function floatKindOf(entry: TensorEntry): FloatKind {
  const kind = floatKinds[entry.dtype];
  if (kind === undefined) throw new Error(`tensor ${entry.name}: unsupported dtype ${entry.dtype}`);
  return kind;
}

/** A (small) float vector widened to f32, e.g. norm weights. */
export function loadVector(entry: TensorEntry): Float32Array {
  const kind = floatKindOf(entry);
  const bytes = readTensorBytes(entry);
  if (kind === "f32") return new Float32Array(bytes);
  const bits = new Uint16Array(bytes);
  const table = kind === "f16" ? f16Table : bf16Table;
  const out = new Float32Array(bits.length);
  for (let i = 0; i < out.length; i++) out[i] = table[bits[i] as number] as number;
  return out;
}

/** Place `entries` side by side in one arena and read them there; their addresses in order. */
function placeTogether(runtime: KernelRuntime, entries: TensorEntry[]): { arena: Arena; ptrs: number[] } {
  const total = entries.reduce((s, e) => s + Arena.footprint(e.length), 0);
  const { arena, ptr } = runtime.placeWeights(total);
  const ptrs: number[] = [];
  let at = ptr;
  for (const entry of entries) {
    readTensorInto(entry, arena.u8(at, entry.length));
    ptrs.push(at);
    at += Arena.footprint(entry.length);
  }
  return { arena, ptrs };
}

/**
 * Load the linear module `prefix` (`prefix.weight`, plus `.scales`/`.biases` when quantized).
 * `groupSize` is the configured quantization group size (MLX default 64).
 */
export function loadLinear(runtime: KernelRuntime, tensors: TensorIndex, prefix: string, groupSize: number | undefined): LinearWeights {
  const weight = requireEntry(tensors, `${prefix}.weight`);
  const scalesEntry = tensors.get(`${prefix}.scales`);
  const [out, cols] = weight.shape;
  if (out === undefined || cols === undefined || weight.shape.length !== 2) throw new Error(`tensor ${weight.name}: expected 2 dimensions`);
  if (scalesEntry === undefined) {
    const kind = floatKindOf(weight);
    const { arena, ptrs } = placeTogether(runtime, [weight]);
    const at = ptrs[0] as number;
    const specials = kind === "f16" ? moveHalfSpecials(arena, at, out, cols) : undefined;
    return { format: "float", kind, out, in: cols, arena, weight: at, specials };
  }
  if (weight.dtype !== "U32") throw new Error(`tensor ${weight.name}: quantized weights must be U32, got ${weight.dtype}`);
  const groups = scalesEntry.shape[1];
  if (groups === undefined || groupSize === undefined) throw new Error(`tensor ${prefix}: quantized but no group size known`);
  const inDim = groups * groupSize;
  const bits = (cols * 32) / inDim;
  if (bits !== 4 && bits !== 8) throw new Error(`tensor ${prefix}: ${bits}-bit quantization is not supported (4 or 8)`);
  // The kernels unpack 16 bytes at a time, all of one group: 32 values at 4 bits, 16 at 8.
  if (groupSize % (bits === 4 ? 32 : 16) !== 0) {
    throw new Error(`tensor ${prefix}: group size ${groupSize} is not supported at ${bits} bits (a multiple of ${bits === 4 ? 32 : 16})`);
  }
  // A group's products are summed exactly in 32-bit integer lanes (assembly/quant.ts): at 8 bits a
  // lane holds a quarter of the group's 255 × 2^15, which passes 2^31 beyond 1024.
  if (groupSize > maxGroupSize) throw new Error(`tensor ${prefix}: group size ${groupSize} is not supported (at most ${maxGroupSize}; MLX uses 32, 64 or 128)`);
  const biasesEntry = requireEntry(tensors, `${prefix}.biases`);
  const scaleKind = floatKindOf(scalesEntry);
  if (biasesEntry.dtype !== scalesEntry.dtype) throw new Error(`tensor ${prefix}: scales are ${scalesEntry.dtype} but biases ${biasesEntry.dtype}`);
  const { arena, ptrs } = placeTogether(runtime, [weight, scalesEntry, biasesEntry]);
  const [packed, scales, biases] = ptrs as [number, number, number];
  return { format: "quantized", bits, groupSize, out, in: inDim, arena, packed, scaleKind, scales, biases };
}

export function requireEntry(tensors: TensorIndex, name: string): TensorEntry {
  const entry = tensors.get(name);
  if (entry === undefined) throw new Error(`tensor ${name} is missing from the model`);
  return entry;
}
