// y = W·x for MLX affine-quantized weights (value = scale × q + bias per group of `groupSize`
// inputs, q packed lowest bits first in u32 words). Σ value·x over a group = scale × Σ q·x +
// bias × Σx. The inputs come as 31-bit block-floating-point integers (prepare.ts: x ≈ X × 2^(e-30)
// per group, X = hi × 2^15 + lo), so Σ q·X is summed exactly in 32-bit integer lanes with the
// 16-bit multiply-add (eight products per instruction), whatever the order. Per group and row the
// exact sums become one f32 four-lane value d (groupValue), and the row's accumulator adds
// (d × scale) × 2^(e-30); the result is the lanes' sum (l0 + l1) + (l2 + l3) plus
// Σ bias × Σx over the groups. The matrix-vector and matrix-matrix forms perform the same f32
// operations in the same order, so a token's result does not depend on how many rows, outputs or
// threads share the call.
import { KIND_F32, floatAt, fourFloats, lanesSum } from "./convert";

// The q of slot j of a 16-byte block as eight 16-bit lanes (the lane pairs prepare.ts lays the
// inputs out for): 4-bit, values j and j + 4 of each word; 8-bit, values j and j + 2. `j` is a
// constant wherever this is inlined.
// @ts-ignore: decorator
@inline
function unpack(four: bool, v: v128, j: i32): v128 {
  if (four) {
    if (j == 0) return v128.and(v, i32x4.splat(0x000f000f));
    if (j == 3) return i16x8.shr_u(v, 12);
    return v128.and(i16x8.shr_u(v, j << 2), i32x4.splat(0x000f000f));
  }
  return j == 0 ? v128.and(v, i32x4.splat(0x00ff00ff)) : i16x8.shr_u(v, 8);
}

// acc plus the 16-bit products of n and x, summed pairwise into four 32-bit lanes (exact).
// @ts-ignore: decorator
@inline
function dotInto(acc: v128, n: v128, x: v128): v128 {
  return i32x4.add(acc, i32x4.dot_i16x8_s(n, x));
}

// A group's exact sums of one row as its f32 four-lane value. The lo sum (never negative) passes
// 2^15 and, at 8 bits, 2^24: its carry goes to hi first, so each lane is hi' × 2^15 + lo' with
// 0 ≤ lo' < 2^15, and the one rounding is hi's (a relative 2^-24 of the lane, as f32's own).
// @ts-ignore: decorator
@inline
function groupValue(hi: v128, lo: v128): v128 {
  const whole = i32x4.add(hi, i32x4.shr_u(lo, 15));
  const rest = v128.and(lo, i32x4.splat(0x7fff));
  return f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(whole), f32x4.splat(32768)), f32x4.convert_i32x4_s(rest));
}

// A row's accumulator after group g: acc + (d × scale) × 2^(e-30) (in this order: scale × 2^(e-30)
// alone could fall below f32's normal range for a group of tiny inputs).
// @ts-ignore: decorator
@inline
function addGroup(acc: v128, d: v128, scales: usize, factors: usize, gOff: usize): v128 {
  return f32x4.add(acc, f32x4.mul(f32x4.mul(d, v128.load32_splat(scales + gOff)), v128.load32_splat(factors + gOff)));
}

// Σ over groups of bias × Σx, in group order (f32).
// @ts-ignore: decorator
@inline
function biasTerm(biases: usize, sums: usize, groups: i32): f32 {
  let bias: f32 = 0;
  for (let g = 0; g < groups; g++) {
    const gOff = <usize>g << 2;
    bias += load<f32>(biases + gOff) * load<f32>(sums + gOff);
  }
  return bias;
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
  // Prepared inputs per block, bytes: 4 slots (4-bit) or 2 (8-bit) of hi and lo halves.
  const xBlock: usize = four ? 128 : 64;
  const groupStride: usize = <usize>groups << 2;
  const factors = sums + groupStride;
  // The panel holds the scales, then the biases, of two rows, widened to f32.
  const panelBiases = panel + (groupStride << 1);
  let o = oStart;
  // Two rows at a time: each prepared input vector is loaded once for both.
  for (; o + 2 <= oEnd; o += 2) {
    const gi = <usize>o * <usize>groups;
    widenParams(scaleKind, scales + paramBytes(scaleKind, gi), groups * 2, panel);
    widenParams(scaleKind, biases + paramBytes(scaleKind, gi), groups * 2, panelBiases);
    let acc0 = f32x4.splat(0);
    let acc1 = f32x4.splat(0);
    let p = w + <usize>o * rowBytes;
    let xq = xp;
    for (let g = 0; g < groups; g++) {
      let hi0 = i32x4.splat(0);
      let lo0 = i32x4.splat(0);
      let hi1 = i32x4.splat(0);
      let lo1 = i32x4.splat(0);
      for (let k = 0; k < blocksPerGroup; k++) {
        const v0 = v128.load(p);
        const v1 = v128.load(p + rowBytes);
        let n0 = unpack(four, v0, 0);
        let n1 = unpack(four, v1, 0);
        let xh = v128.load(xq);
        let xl = v128.load(xq, 16);
        hi0 = dotInto(hi0, n0, xh);
        lo0 = dotInto(lo0, n0, xl);
        hi1 = dotInto(hi1, n1, xh);
        lo1 = dotInto(lo1, n1, xl);
        n0 = unpack(four, v0, 1);
        n1 = unpack(four, v1, 1);
        xh = v128.load(xq, 32);
        xl = v128.load(xq, 48);
        hi0 = dotInto(hi0, n0, xh);
        lo0 = dotInto(lo0, n0, xl);
        hi1 = dotInto(hi1, n1, xh);
        lo1 = dotInto(lo1, n1, xl);
        if (four) {
          n0 = unpack(four, v0, 2);
          n1 = unpack(four, v1, 2);
          xh = v128.load(xq, 64);
          xl = v128.load(xq, 80);
          hi0 = dotInto(hi0, n0, xh);
          lo0 = dotInto(lo0, n0, xl);
          hi1 = dotInto(hi1, n1, xh);
          lo1 = dotInto(lo1, n1, xl);
          n0 = unpack(four, v0, 3);
          n1 = unpack(four, v1, 3);
          xh = v128.load(xq, 96);
          xl = v128.load(xq, 112);
          hi0 = dotInto(hi0, n0, xh);
          lo0 = dotInto(lo0, n0, xl);
          hi1 = dotInto(hi1, n1, xh);
          lo1 = dotInto(lo1, n1, xl);
        }
        p += 16;
        xq += xBlock;
      }
      const gOff = <usize>g << 2;
      acc0 = addGroup(acc0, groupValue(hi0, lo0), panel, factors, gOff);
      acc1 = addGroup(acc1, groupValue(hi1, lo1), panel + groupStride, factors, gOff);
    }
    store<f32>(y + (<usize>o << 2), lanesSum(acc0) + biasTerm(panelBiases, sums, groups));
    store<f32>(y + (<usize>(o + 1) << 2), lanesSum(acc1) + biasTerm(panelBiases + groupStride, sums, groups));
  }
  if (o < oEnd) {
    const slots = four ? 4 : 2;
    const gi = <usize>o * <usize>groups;
    widenParams(scaleKind, scales + paramBytes(scaleKind, gi), groups, panel);
    widenParams(scaleKind, biases + paramBytes(scaleKind, gi), groups, panelBiases);
    let acc = f32x4.splat(0);
    let p = w + <usize>o * rowBytes;
    let xq = xp;
    for (let g = 0; g < groups; g++) {
      let hi = i32x4.splat(0);
      let lo = i32x4.splat(0);
      for (let k = 0; k < blocksPerGroup; k++) {
        const v = v128.load(p);
        for (let j = 0; j < slots; j++) {
          const n = unpackAt(four, v, j);
          hi = dotInto(hi, n, v128.load(xq + (<usize>j << 5)));
          lo = dotInto(lo, n, v128.load(xq + (<usize>j << 5) + 16));
        }
        p += 16;
        xq += xBlock;
      }
      acc = addGroup(acc, groupValue(hi, lo), panel, factors, <usize>g << 2);
    }
    store<f32>(y + (<usize>o << 2), lanesSum(acc) + biasTerm(panelBiases, sums, groups));
  }
}

// unpack with a slot known only at run time (the odd row and the panel's widening).
// @ts-ignore: decorator
@inline
function unpackAt(four: bool, v: v128, j: i32): v128 {
  if (four) return j == 0 ? unpack(true, v, 0) : j == 1 ? unpack(true, v, 1) : j == 2 ? unpack(true, v, 2) : unpack(true, v, 3);
  return j == 0 ? unpack(false, v, 0) : unpack(false, v, 1);
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
  const slots = four ? 4 : 2;
  const blocksPerGroup = four ? groupSize >> 5 : groupSize >> 4;
  // Unpacked 16-bit vectors per group (one per slot of each block).
  const vectorsPerGroup = blocksPerGroup * slots;
  const blocks = groups * blocksPerGroup;
  const xStride = <usize>inN << 2;
  const sumStride = <usize>groups << 3;
  const groupStride = <usize>groups << 2;
  const yStride = <usize>outN << 2;
  // Panel: two weight rows' q unpacked to 16-bit lanes, vector by vector side by side (32 bytes per
  // 8 weights), then their scales and their biases as f32 (groups each, row after row).
  const panelScales = panel + (<usize>inN << 2);
  const panelBiases = panelScales + (groupStride << 1);
  let o = oStart;
  // Two weight rows at a time and the input rows two at a time: each unpacked weight vector is
  // loaded once for two input rows and each input vector once for two weight rows.
  for (; o + 2 <= oEnd; o += 2) {
    let p = w + <usize>o * rowBytes;
    let q = panel;
    for (let b = 0; b < blocks; b++) {
      const va = v128.load(p);
      const vb = v128.load(p + rowBytes);
      for (let j = 0; j < slots; j++) {
        v128.store(q, unpackAt(four, va, j));
        v128.store(q, unpackAt(four, vb, j), 16);
        q += 32;
      }
      p += 16;
    }
    const gi = <usize>o * <usize>groups;
    widenParams(scaleKind, scales + paramBytes(scaleKind, gi), groups * 2, panelScales);
    widenParams(scaleKind, biases + paramBytes(scaleKind, gi), groups * 2, panelBiases);
    let r = 0;
    for (; r + 2 <= rows; r += 2) {
      let acc0a = f32x4.splat(0);
      let acc0b = f32x4.splat(0);
      let acc1a = f32x4.splat(0);
      let acc1b = f32x4.splat(0);
      let x0 = xp + <usize>r * xStride;
      const sum0 = sums + <usize>r * sumStride;
      const sum1 = sum0 + sumStride;
      q = panel;
      for (let g = 0; g < groups; g++) {
        let hi0a = i32x4.splat(0);
        let lo0a = i32x4.splat(0);
        let hi0b = i32x4.splat(0);
        let lo0b = i32x4.splat(0);
        let hi1a = i32x4.splat(0);
        let lo1a = i32x4.splat(0);
        let hi1b = i32x4.splat(0);
        let lo1b = i32x4.splat(0);
        for (let k = 0; k < vectorsPerGroup; k++) {
          const na = v128.load(q);
          const nb = v128.load(q, 16);
          let xh = v128.load(x0);
          let xl = v128.load(x0, 16);
          hi0a = dotInto(hi0a, na, xh);
          lo0a = dotInto(lo0a, na, xl);
          hi0b = dotInto(hi0b, nb, xh);
          lo0b = dotInto(lo0b, nb, xl);
          xh = v128.load(x0 + xStride);
          xl = v128.load(x0 + xStride, 16);
          hi1a = dotInto(hi1a, na, xh);
          lo1a = dotInto(lo1a, na, xl);
          hi1b = dotInto(hi1b, nb, xh);
          lo1b = dotInto(lo1b, nb, xl);
          q += 32;
          x0 += 32;
        }
        const gOff = <usize>g << 2;
        acc0a = addGroup(acc0a, groupValue(hi0a, lo0a), panelScales, sum0 + groupStride, gOff);
        acc0b = addGroup(acc0b, groupValue(hi0b, lo0b), panelScales + groupStride, sum0 + groupStride, gOff);
        acc1a = addGroup(acc1a, groupValue(hi1a, lo1a), panelScales, sum1 + groupStride, gOff);
        acc1b = addGroup(acc1b, groupValue(hi1b, lo1b), panelScales + groupStride, sum1 + groupStride, gOff);
      }
      const out = y + <usize>r * yStride + (<usize>o << 2);
      store<f32>(out, lanesSum(acc0a) + biasTerm(panelBiases, sum0, groups));
      store<f32>(out, lanesSum(acc0b) + biasTerm(panelBiases + groupStride, sum0, groups), 4);
      store<f32>(out + yStride, lanesSum(acc1a) + biasTerm(panelBiases, sum1, groups));
      store<f32>(out + yStride, lanesSum(acc1b) + biasTerm(panelBiases + groupStride, sum1, groups), 4);
    }
    if (r < rows) {
      let acc0a = f32x4.splat(0);
      let acc0b = f32x4.splat(0);
      let x0 = xp + <usize>r * xStride;
      const sum0 = sums + <usize>r * sumStride;
      q = panel;
      for (let g = 0; g < groups; g++) {
        let hi0a = i32x4.splat(0);
        let lo0a = i32x4.splat(0);
        let hi0b = i32x4.splat(0);
        let lo0b = i32x4.splat(0);
        for (let k = 0; k < vectorsPerGroup; k++) {
          const na = v128.load(q);
          const nb = v128.load(q, 16);
          const xh = v128.load(x0);
          const xl = v128.load(x0, 16);
          hi0a = dotInto(hi0a, na, xh);
          lo0a = dotInto(lo0a, na, xl);
          hi0b = dotInto(hi0b, nb, xh);
          lo0b = dotInto(lo0b, nb, xl);
          q += 32;
          x0 += 32;
        }
        const gOff = <usize>g << 2;
        acc0a = addGroup(acc0a, groupValue(hi0a, lo0a), panelScales, sum0 + groupStride, gOff);
        acc0b = addGroup(acc0b, groupValue(hi0b, lo0b), panelScales + groupStride, sum0 + groupStride, gOff);
      }
      const out = y + <usize>r * yStride + (<usize>o << 2);
      store<f32>(out, lanesSum(acc0a) + biasTerm(panelBiases, sum0, groups));
      store<f32>(out, lanesSum(acc0b) + biasTerm(panelBiases + groupStride, sum0, groups), 4);
    }
  }
  // The odd weight row: its own panel, every input row against it.
  if (o < oEnd) {
    let p = w + <usize>o * rowBytes;
    let q = panel;
    for (let b = 0; b < blocks; b++) {
      const v = v128.load(p);
      for (let j = 0; j < slots; j++) {
        v128.store(q, unpackAt(four, v, j));
        q += 16;
      }
      p += 16;
    }
    const gi = <usize>o * <usize>groups;
    widenParams(scaleKind, scales + paramBytes(scaleKind, gi), groups, panelScales);
    widenParams(scaleKind, biases + paramBytes(scaleKind, gi), groups, panelBiases);
    for (let r = 0; r < rows; r++) {
      let acc = f32x4.splat(0);
      let x0 = xp + <usize>r * xStride;
      const sum0 = sums + <usize>r * sumStride;
      q = panel;
      for (let g = 0; g < groups; g++) {
        let hi = i32x4.splat(0);
        let lo = i32x4.splat(0);
        for (let k = 0; k < vectorsPerGroup; k++) {
          const n = v128.load(q);
          hi = dotInto(hi, n, v128.load(x0));
          lo = dotInto(lo, n, v128.load(x0, 16));
          q += 16;
          x0 += 32;
        }
        acc = addGroup(acc, groupValue(hi, lo), panelScales, sum0 + groupStride, <usize>g << 2);
      }
      store<f32>(y + <usize>r * yStride + (<usize>o << 2), lanesSum(acc) + biasTerm(panelBiases, sum0, groups));
    }
  }
}

// One export per width, each with its branches resolved at compile time.

/**
 * 4-bit weights: `w` the packed words `[out, in / 8]`, `scales`/`biases` `[out, in / groupSize]`
 * of float kind `scaleKind`; `xp`/`sums` from prepareQuant (`sums` holds Σx and the factors);
 * `y` `rows × out`. `panel` is per-thread scratch of (in + 4 × in / groupSize) × 4 bytes at least:
 * two rows unpacked to 16-bit lanes and their scales and biases in f32 (for one row too: two
 * rows' scales and biases). `groupSize` is a multiple of 32.
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
