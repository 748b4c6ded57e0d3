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
 * For MLX-quantized weights of `bits` (4 or 8): a 16-byte block holds 4 words of 32/bits values
 * each. The kernels mask value j of all four words in place (its integer is q × 2^(bits·j)), so
 * the input for slot j of lane l is x[l·perWord + j] × 2^-(bits·j); the last slot is shifted down
 * instead of masked (its mask would set the sign bit) and is not scaled. Also writes Σx per group
 * (the bias term of a group is bias × Σx), `in / groupSize` floats per row.
 */
export function prepareQuant(x: usize, rows: i32, inN: i32, bits: i32, groupSize: i32, dst: usize, sums: usize): void {
  const perWord = 32 / bits;
  const perBlock = perWord * 4;
  const groups = inN / groupSize;
  for (let r = 0; r < rows; r++) {
    const src = x + <usize>r * <usize>inN * 4;
    let out = dst + <usize>r * <usize>inN * 4;
    for (let base = 0; base < inN; base += perBlock) {
      for (let j = 0; j < perWord; j++) {
        const scale: f32 = j == perWord - 1 ? 1 : reinterpret<f32>((127 - bits * j) << 23);
        for (let l = 0; l < 4; l++) {
          store<f32>(out, load<f32>(src + (<usize>(base + l * perWord + j) << 2)) * scale);
          out += 4;
        }
      }
    }
    const sumRow = sums + <usize>r * <usize>groups * 4;
    for (let g = 0; g < groups; g++) {
      let s: f32 = 0;
      const from = src + (<usize>(g * groupSize) << 2);
      for (let i = 0; i < groupSize; i++) s += load<f32>(from + (<usize>i << 2));
      store<f32>(sumRow + (<usize>g << 2), s);
    }
  }
}
