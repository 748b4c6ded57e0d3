// Half-precision weights whose f32 pattern the kernels' shift would get wrong or slow — subnormals
// (f32 subnormals after the shift, which x86 multiplies through a microcode assist) and Inf/NaN
// (finite after the shift) — are moved at load into a per-row list (column, exact f32 value) that
// the kernels add after the dense sum; their dense slots become +0. Real weights hold a few per
// thousand subnormals; the list costs 8 bytes each.
import { halfToF32 } from "./convert";

// @ts-ignore: decorator
@inline
function isSpecial(h: u32): bool {
  const exponent = h & 0x7c00;
  return (exponent == 0 && (h & 0x3ff) != 0) || exponent == 0x7c00;
}

/** Count the specials of each row of `[rows, cols]` halves at `w`: rowPtr[r] = specials before row r (rows + 1 u32). */
export function countHalfSpecials(w: usize, rows: i32, cols: i32, rowPtr: usize): u32 {
  let total: u32 = 0;
  let p = w;
  for (let r = 0; r < rows; r++) {
    store<u32>(rowPtr + (<usize>r << 2), total);
    for (let c = 0; c < cols; c++) {
      if (isSpecial(<u32>load<u16>(p))) total++;
      p += 2;
    }
  }
  store<u32>(rowPtr + (<usize>rows << 2), total);
  return total;
}

/** Move the specials counted by countHalfSpecials into `entries` (u32 column, f32 value) and zero them in place. */
export function extractHalfSpecials(w: usize, rows: i32, cols: i32, entries: usize): void {
  let p = w;
  let e = entries;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const h = <u32>load<u16>(p);
      if (isSpecial(h)) {
        store<u32>(e, c);
        store<f32>(e, halfToF32(h), 4);
        store<u16>(p, 0);
        e += 8;
      }
      p += 2;
    }
  }
}
