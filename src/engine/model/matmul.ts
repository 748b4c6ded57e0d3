/**
 * y = W·x for every row of a batch, with W in its stored format. Each output element is summed in
 * the same order whatever the batch size, so a token gives bit-identical results whether it is
 * computed alone or inside a prompt, in one process or split across stages.
 */
import type { FloatData, Linear } from "./tensors.js";

/**
 * `x` holds `rows` vectors of `linear.in` floats, `y` receives `rows` vectors of `linear.out`.
 * `groupSums` is scratch of at least `linear.in / groupSize` floats (quantized only).
 */
export function applyLinear(linear: Linear, x: Float32Array, rows: number, y: Float32Array, groupSums: Float32Array): void {
  for (let r = 0; r < rows; r++) {
    const xOff = r * linear.in;
    const yOff = r * linear.out;
    if (linear.kind === "float") {
      if (linear.weight.kind === "half") matvecHalf(linear.weight.data, linear.weight.table, linear.out, linear.in, x, xOff, y, yOff);
      else matvecF32(linear.weight.data, linear.out, linear.in, x, xOff, y, yOff);
    } else if (linear.bits === 4) {
      matvecQ4(linear.packed, linear.scales, linear.biases, linear.groupSize, linear.out, linear.in, x, xOff, y, yOff, groupSums);
    } else {
      matvecQ8(linear.packed, linear.scales, linear.biases, linear.groupSize, linear.out, linear.in, x, xOff, y, yOff, groupSums);
    }
  }
}

function matvecHalf(w: Uint16Array, table: Float32Array, out: number, inDim: number, x: Float32Array, xOff: number, y: Float32Array, yOff: number): void {
  for (let o = 0; o < out; o++) {
    let base = o * inDim;
    let a0 = 0,
      a1 = 0,
      a2 = 0,
      a3 = 0;
    let i = 0;
    for (; i + 3 < inDim; i += 4, base += 4) {
      a0 += (table[w[base] as number] as number) * (x[xOff + i] as number);
      a1 += (table[w[base + 1] as number] as number) * (x[xOff + i + 1] as number);
      a2 += (table[w[base + 2] as number] as number) * (x[xOff + i + 2] as number);
      a3 += (table[w[base + 3] as number] as number) * (x[xOff + i + 3] as number);
    }
    for (; i < inDim; i++, base++) a0 += (table[w[base] as number] as number) * (x[xOff + i] as number);
    y[yOff + o] = a0 + a1 + (a2 + a3);
  }
}

function matvecF32(w: Float32Array, out: number, inDim: number, x: Float32Array, xOff: number, y: Float32Array, yOff: number): void {
  for (let o = 0; o < out; o++) {
    const base = o * inDim;
    let acc = 0;
    for (let i = 0; i < inDim; i++) acc += (w[base + i] as number) * (x[xOff + i] as number);
    y[yOff + o] = acc;
  }
}

function floatTable(data: FloatData): Float32Array | null {
  return data.kind === "half" ? data.table : null;
}

/** Σ x over each quantization group; the bias term of a group is bias × Σx. */
function sumGroups(x: Float32Array, xOff: number, inDim: number, groupSize: number, sums: Float32Array): void {
  for (let g = 0, i = xOff; g < inDim / groupSize; g++) {
    let s = 0;
    for (let k = 0; k < groupSize; k++, i++) s += x[i] as number;
    sums[g] = s;
  }
}

// MLX affine quantization: value = scale × q + bias, q unpacked lowest bits first from each word,
// so Σ value·x over a group = scale × Σ q·x + bias × Σ x.
function matvecQ4(
  packed: Uint32Array,
  scales: FloatData,
  biases: FloatData,
  groupSize: number,
  out: number,
  inDim: number,
  x: Float32Array,
  xOff: number,
  y: Float32Array,
  yOff: number,
  sums: Float32Array,
): void {
  sumGroups(x, xOff, inDim, groupSize, sums);
  const groups = inDim / groupSize;
  const wordsPerGroup = groupSize / 8;
  const sTab = floatTable(scales),
    bTab = floatTable(biases);
  const sData = scales.data,
    bData = biases.data;
  for (let o = 0; o < out; o++) {
    let acc = 0;
    let word = o * groups * wordsPerGroup;
    for (let g = 0; g < groups; g++) {
      const gi = o * groups + g;
      const s = sTab === null ? (sData[gi] as number) : (sTab[sData[gi] as number] as number);
      const b = bTab === null ? (bData[gi] as number) : (bTab[bData[gi] as number] as number);
      let dot = 0;
      let i = xOff + g * groupSize;
      for (let wI = 0; wI < wordsPerGroup; wI++, word++, i += 8) {
        const v = packed[word] as number;
        dot +=
          (v & 15) * (x[i] as number) +
          ((v >>> 4) & 15) * (x[i + 1] as number) +
          ((v >>> 8) & 15) * (x[i + 2] as number) +
          ((v >>> 12) & 15) * (x[i + 3] as number) +
          ((v >>> 16) & 15) * (x[i + 4] as number) +
          ((v >>> 20) & 15) * (x[i + 5] as number) +
          ((v >>> 24) & 15) * (x[i + 6] as number) +
          (v >>> 28) * (x[i + 7] as number);
      }
      acc += s * dot + b * (sums[g] as number);
    }
    y[yOff + o] = acc;
  }
}

function matvecQ8(
  packed: Uint32Array,
  scales: FloatData,
  biases: FloatData,
  groupSize: number,
  out: number,
  inDim: number,
  x: Float32Array,
  xOff: number,
  y: Float32Array,
  yOff: number,
  sums: Float32Array,
): void {
  sumGroups(x, xOff, inDim, groupSize, sums);
  const groups = inDim / groupSize;
  const wordsPerGroup = groupSize / 4;
  const sTab = floatTable(scales),
    bTab = floatTable(biases);
  const sData = scales.data,
    bData = biases.data;
  for (let o = 0; o < out; o++) {
    let acc = 0;
    let word = o * groups * wordsPerGroup;
    for (let g = 0; g < groups; g++) {
      const gi = o * groups + g;
      const s = sTab === null ? (sData[gi] as number) : (sTab[sData[gi] as number] as number);
      const b = bTab === null ? (bData[gi] as number) : (bTab[bData[gi] as number] as number);
      let dot = 0;
      let i = xOff + g * groupSize;
      for (let wI = 0; wI < wordsPerGroup; wI++, word++, i += 4) {
        const v = packed[word] as number;
        dot += (v & 255) * (x[i] as number) + ((v >>> 8) & 255) * (x[i + 1] as number) + ((v >>> 16) & 255) * (x[i + 2] as number) + (v >>> 24) * (x[i + 3] as number);
      }
      acc += s * dot + b * (sums[g] as number);
    }
    y[yOff + o] = acc;
  }
}

/** Dequantize/widen row `row` of a linear (an embedding lookup) into `dst` at `dstOff`. */
export function readRow(linear: Linear, row: number, dst: Float32Array, dstOff: number): void {
  const inDim = linear.in;
  if (linear.kind === "float") {
    const w = linear.weight;
    for (let i = 0; i < inDim; i++) {
      const k = row * inDim + i;
      dst[dstOff + i] = w.kind === "f32" ? (w.data[k] as number) : (w.table[w.data[k] as number] as number);
    }
    return;
  }
  const perWord = 32 / linear.bits;
  const mask = (1 << linear.bits) - 1;
  const groups = inDim / linear.groupSize;
  const sTab = floatTable(linear.scales),
    bTab = floatTable(linear.biases);
  for (let i = 0; i < inDim; i++) {
    const word = linear.packed[((row * inDim + i) / perWord) | 0] as number;
    const q = (word >>> ((i % perWord) * linear.bits)) & mask;
    const gi = row * groups + ((i / linear.groupSize) | 0);
    const s = sTab === null ? (linear.scales.data[gi] as number) : (sTab[linear.scales.data[gi] as number] as number);
    const b = bTab === null ? (linear.biases.data[gi] as number) : (bTab[linear.biases.data[gi] as number] as number);
    dst[dstOff + i] = s * q + b;
  }
}
