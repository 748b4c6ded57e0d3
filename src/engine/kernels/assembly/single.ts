// y = W·x for f32 weights. Each output: one four-lane accumulator over the inputs in steps of 4,
// its lanes summed (l0 + l1) + (l2 + l3), then the tail inputs one by one — the same operations
// for one row or many.
import { lanesSum } from "./convert";

// @ts-ignore: decorator
@inline
function tail(r: f32, row: usize, x: usize, inN: i32): f32 {
  for (let i = inN & ~3; i < inN; i++) r += load<f32>(row + (<usize>i << 2)) * load<f32>(x + (<usize>i << 2));
  return r;
}

/** One input row, four outputs at once: each input step is loaded once for four weight rows. */
function matvec(w: usize, x: usize, y: usize, inN: i32, oStart: i32, oEnd: i32): void {
  const steps = inN >> 2;
  const rowBytes = <usize>inN << 2;
  // Rows from the four quarters of the range: four long sequential streams (see half.ts).
  const quarter = (oEnd - oStart) >> 2;
  const skip = <usize>quarter * rowBytes;
  for (let g = 0; g < quarter; g++) {
    let a0 = f32x4.splat(0);
    let a1 = f32x4.splat(0);
    let a2 = f32x4.splat(0);
    let a3 = f32x4.splat(0);
    const o = oStart + g;
    const row = w + <usize>o * rowBytes;
    for (let s = 0; s < steps; s++) {
      const off = <usize>s << 4;
      const xv = v128.load(x + off);
      a0 = f32x4.add(a0, f32x4.mul(v128.load(row + off), xv));
      a1 = f32x4.add(a1, f32x4.mul(v128.load(row + skip + off), xv));
      a2 = f32x4.add(a2, f32x4.mul(v128.load(row + skip * 2 + off), xv));
      a3 = f32x4.add(a3, f32x4.mul(v128.load(row + skip * 3 + off), xv));
    }
    store<f32>(y + (<usize>o << 2), tail(lanesSum(a0), row, x, inN));
    store<f32>(y + (<usize>(o + quarter) << 2), tail(lanesSum(a1), row + skip, x, inN));
    store<f32>(y + (<usize>(o + quarter * 2) << 2), tail(lanesSum(a2), row + skip * 2, x, inN));
    store<f32>(y + (<usize>(o + quarter * 3) << 2), tail(lanesSum(a3), row + skip * 3, x, inN));
  }
  for (let o = oStart + quarter * 4; o < oEnd; o++) {
    let a = f32x4.splat(0);
    const row = w + <usize>o * rowBytes;
    for (let s = 0; s < steps; s++) {
      const off = <usize>s << 4;
      a = f32x4.add(a, f32x4.mul(v128.load(row + off), v128.load(x + off)));
    }
    store<f32>(y + (<usize>o << 2), tail(lanesSum(a), row, x, inN));
  }
}

/** f32 weights `[out, in]` at `w`, input `x` (`rows × in`), output `y` (`rows × out`). */
export function linearF32(w: usize, x: usize, y: usize, rows: i32, inN: i32, outN: i32, oStart: i32, oEnd: i32): void {
  const steps = inN >> 2;
  const rowBytes = <usize>inN << 2;
  const yStride = <usize>outN << 2;
  if (rows == 1) {
    matvec(w, x, y, inN, oStart, oEnd);
    return;
  }
  for (let o = oStart; o < oEnd; o++) {
    const row = w + <usize>o * rowBytes;
    let r = 0;
    // Four input rows per pass over the weight row.
    for (; r + 4 <= rows; r += 4) {
      let a0 = f32x4.splat(0);
      let a1 = f32x4.splat(0);
      let a2 = f32x4.splat(0);
      let a3 = f32x4.splat(0);
      const x0 = x + <usize>r * rowBytes;
      for (let s = 0; s < steps; s++) {
        const off = <usize>s << 4;
        const wv = v128.load(row + off);
        a0 = f32x4.add(a0, f32x4.mul(wv, v128.load(x0 + off)));
        a1 = f32x4.add(a1, f32x4.mul(wv, v128.load(x0 + rowBytes + off)));
        a2 = f32x4.add(a2, f32x4.mul(wv, v128.load(x0 + rowBytes * 2 + off)));
        a3 = f32x4.add(a3, f32x4.mul(wv, v128.load(x0 + rowBytes * 3 + off)));
      }
      const out = y + <usize>r * yStride + (<usize>o << 2);
      store<f32>(out, tail(lanesSum(a0), row, x0, inN));
      store<f32>(out + yStride, tail(lanesSum(a1), row, x0 + rowBytes, inN));
      store<f32>(out + yStride * 2, tail(lanesSum(a2), row, x0 + rowBytes * 2, inN));
      store<f32>(out + yStride * 3, tail(lanesSum(a3), row, x0 + rowBytes * 3, inN));
    }
    for (; r < rows; r++) {
      let a = f32x4.splat(0);
      const x0 = x + <usize>r * rowBytes;
      for (let s = 0; s < steps; s++) {
        const off = <usize>s << 4;
        a = f32x4.add(a, f32x4.mul(v128.load(row + off), v128.load(x0 + off)));
      }
      store<f32>(y + <usize>r * yStride + (<usize>o << 2), tail(lanesSum(a), row, x0, inN));
    }
  }
}
