// Input preparation: each product reads its input vector in the order its weights unpack, so the
// inner loops never shuffle lanes. Costs O(rows × in), against O(rows × in × out) for the product.
import { HALF_INPUT_SCALE } from "./convert";

/**
 * For 16-bit float weights: per block of 8 inputs, the four even elements then the four odd
 * ones, times `scale` (2^56 for half precision, 1 for bfloat16). Only the whole blocks are
 * written (⌊in/8⌋ × 8 floats per row); the tail is read from the raw input.
 */
export function prepareHalf(x: usize, rows: i32, inN: i32, dst: usize, halfPrecision: bool): void {
  const blocks = inN >> 3;
  const scale = f32x4.splat(halfPrecision ? HALF_INPUT_SCALE : 1);
  for (let r = 0; r < rows; r++) {
    let src = x + <usize>r * <usize>inN * 4;
    let out = dst + <usize>r * <usize>blocks * 32;
    for (let b = 0; b < blocks; b++) {
      const lo = v128.load(src);
      const hi = v128.load(src, 16);
      v128.store(out, f32x4.mul(v128.shuffle<f32>(lo, hi, 0, 2, 4, 6), scale));
      v128.store(out, f32x4.mul(v128.shuffle<f32>(lo, hi, 1, 3, 5, 7), scale), 16);
      src += 32;
      out += 32;
    }
  }
}

/**
 * For MLX-quantized weights of `bits` (4 or 8), a block-float copy of the input that the integer
 * kernels multiply exactly (quant.ts). Per group of `groupSize` inputs, with 2^e the least power of
 * two above the group's largest magnitude (e clamped to [-96, 129], so both factors below are
 * normal f32): X = trunc(x × 2^(30-e)), |X| < 2^30, kept as two 16-bit halves, hi = X >> 15
 * (signed) and lo = X & 0x7fff, so X = hi × 2^15 + lo. X differs from x × 2^(30-e) by less than
 * one, a relative 2^-30 of the group's largest input, below f32's own rounding (2^-24). (A group
 * whose largest input is below 2^-96, about 1e-29, keeps fewer bits.)
 *
 * Layout, `in` × 4 bytes per row: per 16-byte block of packed weights (4 words), one slot per
 * 16-bit lane pair the kernel unpacks (4-bit: 4 slots, value j of a word's low half and value
 * j + 4 of its high half; 8-bit: 2 slots, values j and j + 2), each slot 8 hi halves then 8 lo
 * halves, in the lanes' order. Also writes, per row, Σx per group (f32, the bias term of a group is
 * bias × Σx) and then 2^(e-30) per group: `2 × in / groupSize` floats per row. A non-finite input
 * makes its group's Σx non-finite, which the result carries.
 */
export function prepareQuant(x: usize, rows: i32, inN: i32, bits: i32, groupSize: i32, dst: usize, sums: usize): void {
  const perWord = 32 / bits;
  const half = perWord >> 1;
  const perBlock = perWord * 4;
  const groups = inN / groupSize;
  for (let r = 0; r < rows; r++) {
    const src = x + <usize>r * <usize>inN * 4;
    const out = dst + <usize>r * <usize>inN * 4;
    const sumRow = sums + <usize>r * <usize>groups * 8;
    const factorRow = sumRow + (<usize>groups << 2);
    for (let g = 0; g < groups; g++) {
      const from = src + (<usize>(g * groupSize) << 2);
      let s: f32 = 0;
      let m: f32 = 0;
      for (let i = 0; i < groupSize; i++) {
        const v = load<f32>(from + (<usize>i << 2));
        s += v;
        m = max(m, abs(v));
      }
      // A NaN input makes m NaN (e is then 129), and Σx carries it.
      const field = <i32>((reinterpret<u32>(m) >> 23) & 0xff);
      const e = min(129, max(-96, field - 126));
      const up = reinterpret<f32>(<u32>(157 - e) << 23);
      store<f32>(sumRow + (<usize>g << 2), s);
      store<f32>(factorRow + (<usize>g << 2), reinterpret<f32>(<u32>(97 + e) << 23));
      for (let base = g * groupSize; base < (g + 1) * groupSize; base += perBlock) {
        const block = out + (<usize>base << 2);
        for (let j = 0; j < half; j++) {
          for (let k = 0; k < 4; k++) {
            for (let h = 0; h < 2; h++) {
              const v = load<f32>(src + (<usize>(base + k * perWord + j + h * half) << 2));
              // Saturating: an infinite or NaN input gives a finite X (its group's Σx says so).
              const big = i32x4.extract_lane(i32x4.trunc_sat_f32x4_s(f32x4.splat(v * up)), 0);
              const lane = <usize>(k * 2 + h) << 1;
              store<i16>(block + (<usize>j << 5) + lane, <i16>(big >> 15));
              store<i16>(block + (<usize>j << 5) + 16 + lane, <i16>(big & 0x7fff));
            }
          }
        }
      }
    }
  }
}
