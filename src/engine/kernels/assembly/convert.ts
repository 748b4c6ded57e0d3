// Scalar conversions and the SIMD widening of 16-bit floats shared by every kernel.

/** IEEE half bits → f32, exactly (subnormals, infinities and NaN included). */
export function halfToF32(h: u32): f32 {
  const sign: u32 = (h & 0x8000) << 16;
  const exponent: u32 = (h >> 10) & 0x1f;
  const mantissa: u32 = h & 0x3ff;
  if (exponent == 0) {
    // m × 2^-24: the integer converts exactly and the power of two scales it exactly.
    const magnitude: f32 = <f32>mantissa * 5.9604644775390625e-8;
    return sign != 0 ? -magnitude : magnitude;
  }
  if (exponent == 31) return reinterpret<f32>(sign | 0x7f800000 | (mantissa << 13));
  return reinterpret<f32>(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

/** bfloat16 bits → f32 (the high half of an f32). */
// @ts-ignore: decorator
@inline
export function bf16ToF32(h: u32): f32 {
  return reinterpret<f32>(h << 16);
}

/** Element kinds of 16- and 32-bit float tensors, as the host numbers them. */
export const KIND_F32: i32 = 0;
export const KIND_F16: i32 = 1;
export const KIND_BF16: i32 = 2;

/** Element `index` of a float tensor of `kind` at `ptr`, as f32. */
// @ts-ignore: decorator
@inline
export function floatAt(kind: i32, ptr: usize, index: usize): f32 {
  if (kind == KIND_F32) return load<f32>(ptr + (index << 2));
  const h: u32 = <u32>load<u16>(ptr + (index << 1));
  return kind == KIND_F16 ? halfToF32(h) : bf16ToF32(h);
}

// A v128 of eight 16-bit floats holds element pairs: within each 32-bit lane the even element is
// the low half and the odd element the high half. The kernels widen the four even elements and
// the four odd elements of a block separately (inputs are permuted to match), which costs two or
// three integer operations per four weights and never a lane shuffle.
//
// Half precision: shifting the 16 bits so the exponent lands in f32's exponent field gives an
// f32 equal to the weight × 2^-112 for every normal half (the exponent bias differs by 112). The
// inputs are pre-scaled by 2^56 and results by 2^56, so the 2^-112 costs no instruction and every
// product stays a normal f32. Subnormal halves would be f32 subnormals here — which x86 multiplies
// through a slow microcode assist — so the loader moves them (and any Inf/NaN) to a per-row list
// applied exactly after the dense sum, leaving zeros in their place.

/** f32 bit patterns of the odd halves (high halves of each lane), scaled by 2^-112. */
// @ts-ignore: decorator
@inline
export function oddHalves(v: v128): v128 {
  return v128.and(i32x4.shr_s(v, 3), i32x4.splat(0x8fffe000));
}

/** f32 bit patterns of the even halves (low halves of each lane), scaled by 2^-112. */
// @ts-ignore: decorator
@inline
export function evenHalves(v: v128): v128 {
  return v128.and(i32x4.shr_s(i32x4.shl(v, 16), 3), i32x4.splat(0x8fffe000));
}

/** f32 values of the odd bfloat16s (high halves of each lane). */
// @ts-ignore: decorator
@inline
export function oddBf16(v: v128): v128 {
  return v128.and(v, i32x4.splat(0xffff0000));
}

/** f32 values of the even bfloat16s (low halves of each lane). */
// @ts-ignore: decorator
@inline
export function evenBf16(v: v128): v128 {
  return i32x4.shl(v, 16);
}

/** Input scale of half-precision products (2^56); results are scaled back by the same factor. */
export const HALF_INPUT_SCALE: f32 = 72057594037927936.0;

/** Σ of the four lanes in a fixed order: (l0 + l1) + (l2 + l3). */
// @ts-ignore: decorator
@inline
export function lanesSum(v: v128): f32 {
  return f32x4.extract_lane(v, 0) + f32x4.extract_lane(v, 1) + (f32x4.extract_lane(v, 2) + f32x4.extract_lane(v, 3));
}

/** 2^112: undoes the scale of widened half-precision bits. */
const HALF_UNSCALE: f32 = 5.192296858534828e33;

/**
 * Elements 0–3 of a float tensor of `kind` at `ptr`, as the four lanes of an f32x4: exactly
 * floatAt of each, without its branches per element.
 */
// @ts-ignore: decorator
@inline
export function fourFloats(kind: i32, ptr: usize): v128 {
  if (kind == KIND_F32) return v128.load(ptr);
  // The 16 bits of each element in the low half of its 32-bit lane.
  const h = v128.load16x4_u(ptr);
  if (kind != KIND_F16) return i32x4.shl(h, 16);
  // Finite halves: the widened bits are the value × 2^-112 (subnormals included, see above), and
  // × 2^112 is exact. Infinities and NaN (exponent 31) get f32's all-ones exponent instead.
  const finite = f32x4.mul(evenHalves(h), f32x4.splat(HALF_UNSCALE));
  const special = i32x4.eq(v128.and(h, i32x4.splat(0x7c00)), i32x4.splat(0x7c00));
  const sign = i32x4.shl(v128.and(h, i32x4.splat(0x8000)), 16);
  const wide = v128.or(sign, v128.or(i32x4.splat(0x7f800000), i32x4.shl(v128.and(h, i32x4.splat(0x3ff)), 13)));
  return v128.bitselect(wide, finite, special);
}
