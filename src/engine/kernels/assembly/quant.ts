// y = W·x for MLX affine-quantized weights (value = scale × q + bias per group of `groupSize`
// inputs, q packed lowest bits first in u32 words). Σ value·x over a group = scale × Σ q·x +
// bias × Σx, so each output keeps a four-lane accumulator of scale × (the group's four-lane Σ q·x)
// and a scalar Σ bias × Σx; the result is the lanes' sum (l0 + l1) + (l2 + l3) plus that scalar.
// The matrix-vector and matrix-matrix forms perform the same operations in the same order.
import { floatAt, fourFloats, KIND_F32, lanesSum } from "./convert";

// One 16-byte block (4 words) of 4-bit values against its prepared inputs: value j of every word
// is masked in place (q × 16^j as an integer, exact in f32), the inputs carry 16^-j.
// @ts-ignore: decorator
@inline
function dot4(d: v128, v: v128, xq: usize): v128 {
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf))), v128.load(xq)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf0))), v128.load(xq, 16)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf00))), v128.load(xq, 32)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf000))), v128.load(xq, 48)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf0000))), v128.load(xq, 64)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf00000))), v128.load(xq, 80)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf000000))), v128.load(xq, 96)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.shr_u(v, 28)), v128.load(xq, 112)));
  return d;
}

// The same for 8-bit values (4 per word).
// @ts-ignore: decorator
@inline
function dot8(d: v128, v: v128, xq: usize): v128 {
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xff))), v128.load(xq)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xff00))), v128.load(xq, 16)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xff0000))), v128.load(xq, 32)));
  d = f32x4.add(d, f32x4.mul(f32x4.convert_i32x4_s(i32x4.shr_u(v, 24)), v128.load(xq, 48)));
  return d;
}

// @ts-ignore: decorator
@inline
function dot(four: bool, d: v128, v: v128, xq: usize): v128 {
  return four ? dot4(d, v, xq) : dot8(d, v, xq);
}

// The integers of one block, widened for the panel (the same values dot4/dot8 multiply).
// @ts-ignore: decorator
@inline
function widen(four: bool, v: v128, q: usize): void {
  if (four) {
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf))));
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf0))), 16);
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf00))), 32);
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf000))), 48);
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf0000))), 64);
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf00000))), 80);
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xf000000))), 96);
    v128.store(q, f32x4.convert_i32x4_s(i32x4.shr_u(v, 28)), 112);
  } else {
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xff))));
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xff00))), 16);
    v128.store(q, f32x4.convert_i32x4_s(v128.and(v, i32x4.splat(0xff0000))), 32);
    v128.store(q, f32x4.convert_i32x4_s(i32x4.shr_u(v, 24)), 48);
  }
}

// Bytes before element `index` of a float tensor of `kind`.
// @ts-ignore: decorator
@inline
function paramBytes(kind: i32, index: usize): usize {
  return kind == KIND_F32 ? index << 2 : index << 1;
}

// `n` consecutive scales or biases of `kind` at `src`, as f32 at `dst` (exactly floatAt of each).
// @ts-ignore: decorator
@inline
function widenParams(kind: i32, src: usize, n: i32, dst: usize): void {
  let i = 0;
  for (; i + 4 <= n; i += 4) v128.store(dst + (<usize>i << 2), fourFloats(kind, src + paramBytes(kind, <usize>i)));
  for (; i < n; i++) store<f32>(dst + (<usize>i << 2), floatAt(kind, src, <usize>i));
}

// @ts-ignore: decorator
@inline
function matvec(
  four: bool,
  w: usize,
  scaleKind: i32,
  scales: usize,
  biases: usize,
  groupSize: i32,
  xp: usize,
  sums: usize,
  y: usize,
  inN: i32,
  oStart: i32,
  oEnd: i32,
  panel: usize,
): void {
  const rowBytes: usize = four ? <usize>inN >> 1 : <usize>inN;
  const groups = inN / groupSize;
  const blocksPerGroup = four ? groupSize >> 5 : groupSize >> 4;
  // Prepared inputs per block, bytes: 32 (4-bit) or 16 (8-bit) floats.
  const xBlock: usize = four ? 128 : 64;
  const rowScales = panel;
  const rowBiases = panel + (<usize>groups << 2);
  // One row at a time, rows in order: the weights are one sequential stream, and one sum, one
  // weight block, the masks and a product fit in registers, so the inputs are read straight from
  // memory (L1) and nothing spills. The row's scales and biases are widened to f32 first.
  for (let o = oStart; o < oEnd; o++) {
    const gi = <usize>o * <usize>groups;
    widenParams(scaleKind, scales + paramBytes(scaleKind, gi), groups, rowScales);
    widenParams(scaleKind, biases + paramBytes(scaleKind, gi), groups, rowBiases);
    let acc = f32x4.splat(0);
    let bias: f32 = 0;
    let p = w + <usize>o * rowBytes;
    let xq = xp;
    for (let g = 0; g < groups; g++) {
      let d = f32x4.splat(0);
      let k = 0;
      for (; k + 2 <= blocksPerGroup; k += 2) {
        d = dot(four, d, v128.load(p), xq);
        d = dot(four, d, v128.load(p, 16), xq + xBlock);
        p += 32;
        xq += xBlock * 2;
      }
      if (k < blocksPerGroup) {
        d = dot(four, d, v128.load(p), xq);
        p += 16;
        xq += xBlock;
      }
      const gOff = <usize>g << 2;
      acc = f32x4.add(acc, f32x4.mul(d, v128.load32_splat(rowScales + gOff)));
      bias += load<f32>(rowBiases + gOff) * load<f32>(sums + gOff);
    }
    store<f32>(y + (<usize>o << 2), lanesSum(acc) + bias);
  }
}

// @ts-ignore: decorator
@inline
function matmul(
  four: bool,
  w: usize,
  scaleKind: i32,
  scales: usize,
  biases: usize,
  groupSize: i32,
  xp: usize,
  sums: usize,
  y: usize,
  rows: i32,
  inN: i32,
  outN: i32,
  oStart: i32,
  oEnd: i32,
  panel: usize,
): void {
  const rowBytes: usize = four ? <usize>inN >> 1 : <usize>inN;
  const groups = inN / groupSize;
  const blocksPerGroup = four ? groupSize >> 5 : groupSize >> 4;
  const xBlock: usize = four ? 128 : 64;
  const blocks = groups * blocksPerGroup;
  const xStride = <usize>inN << 2;
  const sumStride = <usize>groups << 2;
  const yStride = <usize>outN << 2;
  // Panel: the row's integers as f32 (in floats), then its scales and biases as f32 (groups each).
  const panelScales = panel + xStride;
  const panelBiases = panelScales + sumStride;
  for (let o = oStart; o < oEnd; o++) {
    let p = w + <usize>o * rowBytes;
    let q = panel;
    for (let b = 0; b < blocks; b++) {
      widen(four, v128.load(p), q);
      p += 16;
      q += xBlock;
    }
    const gi = <usize>o * <usize>groups;
    widenParams(scaleKind, scales + paramBytes(scaleKind, gi), groups, panelScales);
    widenParams(scaleKind, biases + paramBytes(scaleKind, gi), groups, panelBiases);
    const vectorsPerBlock = four ? 8 : 4;
    let r = 0;
    for (; r + 4 <= rows; r += 4) {
      let acc0 = f32x4.splat(0);
      let acc1 = f32x4.splat(0);
      let acc2 = f32x4.splat(0);
      let acc3 = f32x4.splat(0);
      let bias0: f32 = 0;
      let bias1: f32 = 0;
      let bias2: f32 = 0;
      let bias3: f32 = 0;
      let x0 = xp + <usize>r * xStride;
      q = panel;
      const sum0 = sums + <usize>r * sumStride;
      for (let g = 0; g < groups; g++) {
        let d0 = f32x4.splat(0);
        let d1 = f32x4.splat(0);
        let d2 = f32x4.splat(0);
        let d3 = f32x4.splat(0);
        for (let k = 0; k < blocksPerGroup * vectorsPerBlock; k++) {
          const wv = v128.load(q);
          d0 = f32x4.add(d0, f32x4.mul(wv, v128.load(x0)));
          d1 = f32x4.add(d1, f32x4.mul(wv, v128.load(x0 + xStride)));
          d2 = f32x4.add(d2, f32x4.mul(wv, v128.load(x0 + xStride * 2)));
          d3 = f32x4.add(d3, f32x4.mul(wv, v128.load(x0 + xStride * 3)));
          q += 16;
          x0 += 16;
        }
        const gOff = <usize>g << 2;
        const s = f32x4.splat(load<f32>(panelScales + gOff));
        acc0 = f32x4.add(acc0, f32x4.mul(d0, s));
        acc1 = f32x4.add(acc1, f32x4.mul(d1, s));
        acc2 = f32x4.add(acc2, f32x4.mul(d2, s));
        acc3 = f32x4.add(acc3, f32x4.mul(d3, s));
        const b = load<f32>(panelBiases + gOff);
        bias0 += b * load<f32>(sum0 + gOff);
        bias1 += b * load<f32>(sum0 + sumStride + gOff);
        bias2 += b * load<f32>(sum0 + sumStride * 2 + gOff);
        bias3 += b * load<f32>(sum0 + sumStride * 3 + gOff);
      }
      const out = y + <usize>r * yStride + (<usize>o << 2);
      store<f32>(out, lanesSum(acc0) + bias0);
      store<f32>(out + yStride, lanesSum(acc1) + bias1);
      store<f32>(out + yStride * 2, lanesSum(acc2) + bias2);
      store<f32>(out + yStride * 3, lanesSum(acc3) + bias3);
    }
    for (; r < rows; r++) {
      let acc = f32x4.splat(0);
      let bias: f32 = 0;
      let x0 = xp + <usize>r * xStride;
      q = panel;
      const sum0 = sums + <usize>r * sumStride;
      for (let g = 0; g < groups; g++) {
        let d = f32x4.splat(0);
        for (let k = 0; k < blocksPerGroup * vectorsPerBlock; k++) {
          d = f32x4.add(d, f32x4.mul(v128.load(q), v128.load(x0)));
          q += 16;
          x0 += 16;
        }
        const gOff = <usize>g << 2;
        acc = f32x4.add(acc, f32x4.mul(d, f32x4.splat(load<f32>(panelScales + gOff))));
        bias += load<f32>(panelBiases + gOff) * load<f32>(sum0 + gOff);
      }
      store<f32>(y + <usize>r * yStride + (<usize>o << 2), lanesSum(acc) + bias);
    }
  }
}

// One export per width, each with its branches resolved at compile time.

/**
 * 4-bit weights: `w` the packed words `[out, in / 8]`, `scales`/`biases` `[out, in / groupSize]`
 * of float kind `scaleKind`; `xp`/`sums` from prepareQuant; `y` `rows × out`. `panel` is
 * per-thread scratch of (in + 2 × in / groupSize) × 4 bytes, for one row too (its scales and
 * biases in f32). `groupSize` is a multiple of 32.
 */
export function linearQ4(
  w: usize,
  scaleKind: i32,
  scales: usize,
  biases: usize,
  groupSize: i32,
  xp: usize,
  sums: usize,
  y: usize,
  rows: i32,
  inN: i32,
  outN: i32,
  oStart: i32,
  oEnd: i32,
  panel: usize,
): void {
  if (rows == 1) matvec(true, w, scaleKind, scales, biases, groupSize, xp, sums, y, inN, oStart, oEnd, panel);
  else matmul(true, w, scaleKind, scales, biases, groupSize, xp, sums, y, rows, inN, outN, oStart, oEnd, panel);
}

/** 8-bit weights (`[out, in / 4]` words): as linearQ4; `groupSize` is a multiple of 16. */
export function linearQ8(
  w: usize,
  scaleKind: i32,
  scales: usize,
  biases: usize,
  groupSize: i32,
  xp: usize,
  sums: usize,
  y: usize,
  rows: i32,
  inN: i32,
  outN: i32,
  oStart: i32,
  oEnd: i32,
  panel: usize,
): void {
  if (rows == 1) matvec(false, w, scaleKind, scales, biases, groupSize, xp, sums, y, inN, oStart, oEnd, panel);
  else matmul(false, w, scaleKind, scales, biases, groupSize, xp, sums, y, rows, inN, outN, oStart, oEnd, panel);
}
