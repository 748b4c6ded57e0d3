/**
 * Linear maps (and embeddings) with weights in their stored format inside an arena, and the
 * products y = W·x over them: inputs are prepared once per job in the home arena (copied to the
 * weights' arena when that is another), the products of a job run on every thread, outputs land
 * in the home arena.
 */
import type { Arena } from "./arena.js";
import type { KernelRuntime } from "./runtime.js";
import { TaskKind } from "./tasks.js";

/** Stored float element kinds (numbered as the kernels number them). */
export type FloatKind = "f32" | "f16" | "bf16";
export const floatKindCode: Record<FloatKind, number> = { f32: 0, f16: 1, bf16: 2 };
export const floatKindBytes: Record<FloatKind, number> = { f32: 4, f16: 2, bf16: 2 };

/** Half-precision weights the kernels add back after the dense sum (see assembly/specials.ts). */
export interface MovedSpecials {
  /** `out + 1` u32: entries of row r are [rowPtr[r], rowPtr[r + 1]). */
  rowPtr: number;
  /** u32 column, f32 value, 8 bytes each. */
  entries: number;
  count: number;
}

/** A linear map `[out, in]` (also an embedding: row = token). Addresses are bytes in `arena`. */
export type LinearWeights =
  | { format: "float"; kind: FloatKind; out: number; in: number; arena: Arena; weight: number; specials: MovedSpecials | undefined }
  | {
      format: "quantized";
      bits: 4 | 8;
      groupSize: number;
      out: number;
      in: number;
      arena: Arena;
      packed: number;
      scaleKind: FloatKind;
      scales: number;
      biases: number;
    };

/** Bytes a linear holds in memory: weights, quantization parameters, moved specials. */
export function linearBytes(l: LinearWeights): number {
  if (l.format === "float") {
    const specials = l.specials === undefined ? 0 : (l.out + 1) * 4 + l.specials.count * 8;
    return l.out * l.in * floatKindBytes[l.kind] + specials;
  }
  const groups = l.out * (l.in / l.groupSize);
  return (l.out * l.in * l.bits) / 8 + 2 * groups * floatKindBytes[l.scaleKind];
}

/** The layout a product needs its input in; products of one layout share one prepared input. */
function inputLayout(l: LinearWeights): string {
  if (l.format === "quantized") return `q${l.bits}/${l.groupSize}`;
  return l.kind;
}

/** One product of a job: `x` (rows × in f32) and `y` (rows × out f32) are addresses in the home arena. */
export interface LinearCall {
  weights: LinearWeights;
  x: number;
  y: number;
}

/**
 * Compute every call over `rows` input rows. Calls reading the same input in the same layout from
 * the same arena run as one job (one wake-up of the threads).
 */
export function runLinears(runtime: KernelRuntime, calls: readonly LinearCall[], rows: number): void {
  let i = 0;
  while (i < calls.length) {
    const first = calls[i] as LinearCall;
    let j = i + 1;
    while (j < calls.length && sameJob(first, calls[j] as LinearCall)) j++;
    runJob(runtime, calls.slice(i, j), rows);
    i = j;
  }
}

function sameJob(a: LinearCall, b: LinearCall): boolean {
  return a.x === b.x && a.weights.in === b.weights.in && a.weights.arena === b.weights.arena && inputLayout(a.weights) === inputLayout(b.weights);
}

function runJob(runtime: KernelRuntime, calls: readonly LinearCall[], rows: number): void {
  const home = runtime.home;
  const first = (calls[0] as LinearCall).weights;
  const inN = first.in;
  const arena = first.arena;
  const xBytes = rows * inN * 4;
  // Prepare the input in the home arena.
  let prepared = 0;
  let sums = 0;
  let sumBytes = 0;
  if (first.format === "quantized") {
    prepared = runtime.buffer(home, "prepared", xBytes);
    // Per row and group: Σx, then the input's block-float factor (assembly/prepare.ts).
    sumBytes = rows * (inN / first.groupSize) * 8;
    sums = runtime.buffer(home, "sums", sumBytes);
    home.kernels.prepareQuant((calls[0] as LinearCall).x, rows, inN, first.bits, first.groupSize, prepared, sums);
  } else if (first.kind !== "f32") {
    prepared = runtime.buffer(home, "prepared", xBytes);
    home.kernels.prepareHalf((calls[0] as LinearCall).x, rows, inN, prepared, first.kind === "f16" ? 1 : 0);
  }
  // Weights in another arena: their kernels read inputs and write outputs there.
  let x = (calls[0] as LinearCall).x;
  const outputs: number[] = [];
  if (arena !== home) {
    const stagedX = runtime.buffer(arena, "x", xBytes);
    arena.copyFrom(home, x, stagedX, xBytes);
    x = stagedX;
    if (prepared !== 0) {
      const stagedPrepared = runtime.buffer(arena, "prepared", xBytes);
      arena.copyFrom(home, prepared, stagedPrepared, xBytes);
      prepared = stagedPrepared;
    }
    if (sums !== 0) {
      const stagedSums = runtime.buffer(arena, "sums", sumBytes);
      arena.copyFrom(home, sums, stagedSums, sumBytes);
      sums = stagedSums;
    }
    const totalOut = calls.reduce((s, c) => s + c.weights.out, 0);
    let y = runtime.buffer(arena, "y", rows * totalOut * 4);
    for (const c of calls) {
      outputs.push(y);
      y += rows * c.weights.out * 4;
    }
  } else for (const c of calls) outputs.push(c.y);

  // Per-thread panels, bytes: two widened 16-bit weight rows, or two quantized rows unpacked to
  // 16-bit lanes with their scales and biases in f32 (a matrix-vector product widens only the
  // scales and biases, of two rows).
  const groups = first.format === "quantized" ? inN / first.groupSize : 0;
  const { base: panel, stride: panelStride } = rows > 1 || groups > 0 ? runtime.threadSlots(arena, "panel", (2 * inN + 16 + 2 * groups) * 4) : { base: 0, stride: 0 };

  calls.forEach((c, k) => {
    const l = c.weights;
    const output = { out: outputs[k] as number, rows, rowBytes: l.out * 4, unitBytes: 4 };
    if (l.format === "quantized") {
      runtime.pool.add(l.bits === 4 ? TaskKind.linearQ4 : TaskKind.linearQ8, arena, l.out, rows * l.in * l.out, output, [
        l.packed,
        floatKindCode[l.scaleKind],
        l.scales,
        l.biases,
        l.groupSize,
        prepared,
        sums,
        rows,
        l.in,
        l.out,
        panel,
        panelStride,
      ]);
    } else if (l.kind === "f32") {
      runtime.pool.add(TaskKind.linearF32, arena, l.out, rows * l.in * l.out, output, [l.weight, x, rows, l.in, l.out]);
    } else {
      runtime.pool.add(l.kind === "f16" ? TaskKind.linearF16 : TaskKind.linearBf16, arena, l.out, rows * l.in * l.out, output, [
        l.weight,
        prepared,
        x,
        rows,
        l.in,
        l.out,
        panel,
        panelStride,
        l.specials?.rowPtr ?? 0,
        l.specials?.entries ?? 0,
      ]);
    }
  });
  runtime.pool.run();

  if (arena !== home) calls.forEach((c, k) => home.copyFrom(arena, outputs[k] as number, c.y, rows * c.weights.out * 4));
}

/** Row `row` of `l` as stored values in f32 (an embedding lookup) into `dst` at `dstOffset`. */
export function readRow(runtime: KernelRuntime, l: LinearWeights, row: number, dst: Float32Array, dstOffset: number): void {
  const arena = l.arena;
  const at = runtime.buffer(arena, "row", l.in * 4);
  if (l.format === "float") {
    arena.kernels.readRowFloat(floatKindCode[l.kind], l.weight, l.in, row, at, l.specials?.rowPtr ?? 0, l.specials?.entries ?? 0);
  } else {
    arena.kernels.readRowQuant(l.bits, l.packed, floatKindCode[l.scaleKind], l.scales, l.biases, l.groupSize, l.in, row, at);
  }
  dst.set(arena.f32(at, l.in), dstOffset);
}

/**
 * Move the specials of half-precision weights already in place (see assembly/specials.ts):
 * returns them, or undefined when the matrix has none.
 */
export function moveHalfSpecials(arena: Arena, weight: number, out: number, inN: number): MovedSpecials | undefined {
  const rowPtr = arena.alloc((out + 1) * 4);
  const count = arena.kernels.countHalfSpecials(weight, out, inN, rowPtr) >>> 0;
  if (count === 0) {
    arena.release(rowPtr, (out + 1) * 4);
    return undefined;
  }
  const entries = arena.alloc(count * 8);
  arena.kernels.extractHalfSpecials(weight, out, inN, entries);
  return { rowPtr, entries, count };
}

/**
 * SwiGLU in place over `count` f32 elements at `gate` (and `up`) in the home arena: gate[i] =
 * silu(gate[i]) × up[i], split across the threads for a prefill's many rows.
 */
export function runSwiglu(runtime: KernelRuntime, a: { gate: number; up: number; count: number }): void {
  runtime.pool.add(
    TaskKind.swiglu,
    runtime.home,
    a.count,
    // An exponential and a division per element: worth about 16 multiply-adds.
    a.count * 16,
    { out: a.gate, rows: 1, rowBytes: a.count * 4, unitBytes: 4 },
    [a.gate, a.up],
  );
  runtime.pool.run();
}

/** Causal attention of `rows` query rows at positions start.. over a cache (addresses in the home arena). */
export function runAttention(
  runtime: KernelRuntime,
  a: { q: number; keys: number; values: number; out: number; rows: number; start: number; heads: number; kvHeads: number; headDim: number },
): void {
  const positions = a.start + a.rows;
  const { base: scores, stride: scoresStride } = runtime.threadSlots(runtime.home, "scores", positions * 4);
  const units = a.rows * a.heads;
  runtime.pool.add(
    TaskKind.attention,
    runtime.home,
    units,
    // Scores and weighted values: 2 × headDim multiply-adds per position attended to.
    units * positions * 2 * a.headDim,
    { out: a.out, rows: 1, rowBytes: units * a.headDim * 4, unitBytes: a.headDim * 4 },
    [a.q, a.keys, a.values, a.start, a.heads, a.kvHeads, a.headDim, 0, scores, scoresStride],
    [[7, 1 / Math.sqrt(a.headDim)]],
  );
  runtime.pool.run();
}
