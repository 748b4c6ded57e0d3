// y = W·x for 16-bit float weights (half precision or bfloat16), outputs [oStart, oEnd) of `rows`
// input rows. Every output element is one accumulator of four lanes, fed block by block (8 inputs:
// the even four, then the odd four), then its four lanes summed in a fixed order, scaled, the
// tail inputs (in % 8) added one by one and the row's moved-out specials after them. The
// matrix-vector and matrix-matrix forms perform exactly these operations in this order, so a
// token's result does not depend on how many rows, outputs or threads share the call.
import { bf16ToF32, evenBf16, evenHalves, halfToF32, HALF_INPUT_SCALE, lanesSum, oddBf16, oddHalves } from "./convert";

// @ts-ignore: decorator
@inline
function widenEven(f16: bool, v: v128): v128 {
  return f16 ? evenHalves(v) : evenBf16(v);
}

// @ts-ignore: decorator
@inline
function widenOdd(f16: bool, v: v128): v128 {
  return f16 ? oddHalves(v) : oddBf16(v);
}

/** The lanes' sum, rescaled, then the tail inputs and the specials of row `o`, in that order. */
// @ts-ignore: decorator
@inline
function finish(f16: bool, acc: v128, o: i32, w: usize, x: usize, inN: i32, rowPtr: usize, entries: usize): f32 {
  let r = lanesSum(acc);
  if (f16) r *= HALF_INPUT_SCALE;
  const row = w + <usize>o * <usize>inN * 2;
  for (let i = inN & ~7; i < inN; i++) {
    const h = <u32>load<u16>(row + (<usize>i << 1));
    r += (f16 ? halfToF32(h) : bf16ToF32(h)) * load<f32>(x + (<usize>i << 2));
  }
  if (rowPtr != 0) {
    const end = load<u32>(rowPtr + (<usize>o << 2), 4);
    for (let k = load<u32>(rowPtr + (<usize>o << 2)); k < end; k++) {
      const e = entries + (<usize>k << 3);
      r += load<f32>(e, 4) * load<f32>(x + (<usize>load<u32>(e) << 2));
    }
  }
  return r;
}

// @ts-ignore: decorator
@inline
function matvec(f16: bool, w: usize, xp: usize, x: usize, y: usize, inN: i32, oStart: i32, oEnd: i32, rowPtr: usize, entries: usize): void {
  const blocks = inN >> 3;
  const rowBytes = <usize>inN << 1;
  // Four outputs at once, one from each quarter of the range: each input block is loaded once
  // for four weight rows, and the rows stream from four places far apart — four long sequential
  // streams, which the hardware prefetches, where four adjacent short rows would share pages.
  const quarter = (oEnd - oStart) >> 2;
  const skip = <usize>quarter * rowBytes;
  for (let g = 0; g < quarter; g++) {
    let a0 = f32x4.splat(0);
    let a1 = f32x4.splat(0);
    let a2 = f32x4.splat(0);
    let a3 = f32x4.splat(0);
    const o = oStart + g;
    let p = w + <usize>o * rowBytes;
    let xq = xp;
    for (let b = 0; b < blocks; b++) {
      const xe = v128.load(xq);
      const xo = v128.load(xq, 16);
      let v = v128.load(p);
      a0 = f32x4.add(a0, f32x4.mul(widenEven(f16, v), xe));
      a0 = f32x4.add(a0, f32x4.mul(widenOdd(f16, v), xo));
      v = v128.load(p + skip);
      a1 = f32x4.add(a1, f32x4.mul(widenEven(f16, v), xe));
      a1 = f32x4.add(a1, f32x4.mul(widenOdd(f16, v), xo));
      v = v128.load(p + skip * 2);
      a2 = f32x4.add(a2, f32x4.mul(widenEven(f16, v), xe));
      a2 = f32x4.add(a2, f32x4.mul(widenOdd(f16, v), xo));
      v = v128.load(p + skip * 3);
      a3 = f32x4.add(a3, f32x4.mul(widenEven(f16, v), xe));
      a3 = f32x4.add(a3, f32x4.mul(widenOdd(f16, v), xo));
      p += 16;
      xq += 32;
    }
    store<f32>(y + (<usize>o << 2), finish(f16, a0, o, w, x, inN, rowPtr, entries));
    store<f32>(y + (<usize>(o + quarter) << 2), finish(f16, a1, o + quarter, w, x, inN, rowPtr, entries));
    store<f32>(y + (<usize>(o + quarter * 2) << 2), finish(f16, a2, o + quarter * 2, w, x, inN, rowPtr, entries));
    store<f32>(y + (<usize>(o + quarter * 3) << 2), finish(f16, a3, o + quarter * 3, w, x, inN, rowPtr, entries));
  }
  for (let o = oStart + quarter * 4; o < oEnd; o++) {
    let a = f32x4.splat(0);
    let p = w + <usize>o * rowBytes;
    let xq = xp;
    for (let b = 0; b < blocks; b++) {
      const v = v128.load(p);
      a = f32x4.add(a, f32x4.mul(widenEven(f16, v), v128.load(xq)));
      a = f32x4.add(a, f32x4.mul(widenOdd(f16, v), v128.load(xq, 16)));
      p += 16;
      xq += 32;
    }
    store<f32>(y + (<usize>o << 2), finish(f16, a, o, w, x, inN, rowPtr, entries));
  }
}

// Widen weight row o into the panel at q (f32, the same values the matrix-vector form makes),
// `stride` bytes between blocks.
// @ts-ignore: decorator
@inline
function widenRow(f16: bool, w: usize, rowBytes: usize, o: i32, blocks: i32, q: usize, stride: usize): void {
  let p = w + <usize>o * rowBytes;
  for (let b = 0; b < blocks; b++) {
    const v = v128.load(p);
    v128.store(q, widenEven(f16, v));
    v128.store(q, widenOdd(f16, v), 16);
    p += 16;
    q += stride;
  }
}

// @ts-ignore: decorator
@inline
function matmul(
  f16: bool,
  w: usize,
  xp: usize,
  x: usize,
  y: usize,
  rows: i32,
  inN: i32,
  outN: i32,
  oStart: i32,
  oEnd: i32,
  panel: usize,
  rowPtr: usize,
  entries: usize,
): void {
  const blocks = inN >> 3;
  const rowBytes = <usize>inN << 1;
  const xpStride = <usize>blocks * 32;
  const xStride = <usize>inN << 2;
  const yStride = <usize>outN << 2;
  let o = oStart;
  // Two weight rows at a time, widened once into the panel (block by block, side by side), then
  // every input row streamed past them four at a time: eight accumulators, each input block
  // loaded once for two outputs and each weight block once for four rows.
  for (; o + 2 <= oEnd; o += 2) {
    widenRow(f16, w, rowBytes, o, blocks, panel, 64);
    widenRow(f16, w, rowBytes, o + 1, blocks, panel + 32, 64);
    let r = 0;
    for (; r + 4 <= rows; r += 4) {
      let a0 = f32x4.splat(0);
      let a1 = f32x4.splat(0);
      let a2 = f32x4.splat(0);
      let a3 = f32x4.splat(0);
      let b0 = f32x4.splat(0);
      let b1 = f32x4.splat(0);
      let b2 = f32x4.splat(0);
      let b3 = f32x4.splat(0);
      let x0 = xp + <usize>r * xpStride;
      let q = panel;
      for (let b = 0; b < blocks; b++) {
        const we = v128.load(q);
        const wo = v128.load(q, 16);
        const ve = v128.load(q, 32);
        const vo = v128.load(q, 48);
        let xe = v128.load(x0);
        let xo = v128.load(x0, 16);
        a0 = f32x4.add(a0, f32x4.mul(we, xe));
        a0 = f32x4.add(a0, f32x4.mul(wo, xo));
        b0 = f32x4.add(b0, f32x4.mul(ve, xe));
        b0 = f32x4.add(b0, f32x4.mul(vo, xo));
        xe = v128.load(x0 + xpStride);
        xo = v128.load(x0 + xpStride, 16);
        a1 = f32x4.add(a1, f32x4.mul(we, xe));
        a1 = f32x4.add(a1, f32x4.mul(wo, xo));
        b1 = f32x4.add(b1, f32x4.mul(ve, xe));
        b1 = f32x4.add(b1, f32x4.mul(vo, xo));
        xe = v128.load(x0 + xpStride * 2);
        xo = v128.load(x0 + xpStride * 2, 16);
        a2 = f32x4.add(a2, f32x4.mul(we, xe));
        a2 = f32x4.add(a2, f32x4.mul(wo, xo));
        b2 = f32x4.add(b2, f32x4.mul(ve, xe));
        b2 = f32x4.add(b2, f32x4.mul(vo, xo));
        xe = v128.load(x0 + xpStride * 3);
        xo = v128.load(x0 + xpStride * 3, 16);
        a3 = f32x4.add(a3, f32x4.mul(we, xe));
        a3 = f32x4.add(a3, f32x4.mul(wo, xo));
        b3 = f32x4.add(b3, f32x4.mul(ve, xe));
        b3 = f32x4.add(b3, f32x4.mul(vo, xo));
        q += 64;
        x0 += 32;
      }
      const xr = x + <usize>r * xStride;
      const out = y + <usize>r * yStride + (<usize>o << 2);
      store<f32>(out, finish(f16, a0, o, w, xr, inN, rowPtr, entries));
      store<f32>(out + yStride, finish(f16, a1, o, w, xr + xStride, inN, rowPtr, entries));
      store<f32>(out + yStride * 2, finish(f16, a2, o, w, xr + xStride * 2, inN, rowPtr, entries));
      store<f32>(out + yStride * 3, finish(f16, a3, o, w, xr + xStride * 3, inN, rowPtr, entries));
      store<f32>(out, finish(f16, b0, o + 1, w, xr, inN, rowPtr, entries), 4);
      store<f32>(out + yStride, finish(f16, b1, o + 1, w, xr + xStride, inN, rowPtr, entries), 4);
      store<f32>(out + yStride * 2, finish(f16, b2, o + 1, w, xr + xStride * 2, inN, rowPtr, entries), 4);
      store<f32>(out + yStride * 3, finish(f16, b3, o + 1, w, xr + xStride * 3, inN, rowPtr, entries), 4);
    }
    for (; r < rows; r++) {
      let a = f32x4.splat(0);
      let bsum = f32x4.splat(0);
      let x0 = xp + <usize>r * xpStride;
      let q = panel;
      for (let b = 0; b < blocks; b++) {
        const xe = v128.load(x0);
        const xo = v128.load(x0, 16);
        a = f32x4.add(a, f32x4.mul(v128.load(q), xe));
        a = f32x4.add(a, f32x4.mul(v128.load(q, 16), xo));
        bsum = f32x4.add(bsum, f32x4.mul(v128.load(q, 32), xe));
        bsum = f32x4.add(bsum, f32x4.mul(v128.load(q, 48), xo));
        q += 64;
        x0 += 32;
      }
      const xr = x + <usize>r * xStride;
      const out = y + <usize>r * yStride + (<usize>o << 2);
      store<f32>(out, finish(f16, a, o, w, xr, inN, rowPtr, entries));
      store<f32>(out, finish(f16, bsum, o + 1, w, xr, inN, rowPtr, entries), 4);
    }
  }
  // The last output of an odd range.
  for (; o < oEnd; o++) {
    widenRow(f16, w, rowBytes, o, blocks, panel, 32);
    for (let r = 0; r < rows; r++) {
      let a = f32x4.splat(0);
      let x0 = xp + <usize>r * xpStride;
      let q = panel;
      for (let b = 0; b < blocks; b++) {
        a = f32x4.add(a, f32x4.mul(v128.load(q), v128.load(x0)));
        a = f32x4.add(a, f32x4.mul(v128.load(q, 16), v128.load(x0, 16)));
        q += 32;
        x0 += 32;
      }
      store<f32>(y + <usize>r * yStride + (<usize>o << 2), finish(f16, a, o, w, x + <usize>r * xStride, inN, rowPtr, entries));
    }
  }
}

// One export per format, each with its branches resolved at compile time (a runtime flag in
// these loops costs a select per weight).

/**
 * Half-precision weights `[out, in]` at `w`; `xp` the input prepared by prepareHalf, `x` the raw
 * input (`rows × in` f32), `y` the output (`rows × out` f32). `panel` is per-thread scratch of
 * ⌊in/8⌋ × 64 bytes; `rowPtr`/`entries` the moved-out specials (0 when none).
 */
export function linearF16(
  w: usize,
  xp: usize,
  x: usize,
  y: usize,
  rows: i32,
  inN: i32,
  outN: i32,
  oStart: i32,
  oEnd: i32,
  panel: usize,
  rowPtr: usize,
  entries: usize,
): void {
  if (rows == 1) matvec(true, w, xp, x, y, inN, oStart, oEnd, rowPtr, entries);
  else matmul(true, w, xp, x, y, rows, inN, outN, oStart, oEnd, panel, rowPtr, entries);
}

/** bfloat16 weights: as linearF16 (bfloat16 has no specials to move). */
export function linearBf16(
  w: usize,
  xp: usize,
  x: usize,
  y: usize,
  rows: i32,
  inN: i32,
  outN: i32,
  oStart: i32,
  oEnd: i32,
  panel: usize,
  rowPtr: usize,
  entries: usize,
): void {
  if (rows == 1) matvec(false, w, xp, x, y, inN, oStart, oEnd, rowPtr, entries);
  else matmul(false, w, xp, x, y, rows, inN, outN, oStart, oEnd, panel, rowPtr, entries);
}
