/** Float encodings of the safetensors dtypes the test models use. */
export type FloatDtype = "f16" | "bf16" | "f32";

/** The safetensors header name of each dtype. */
export const safetensorsDtype: Record<FloatDtype, string> = { f16: "F16", bf16: "BF16", f32: "F32" };

/** Bytes per element. */
export const dtypeBytes: Record<FloatDtype, number> = { f16: 2, bf16: 2, f32: 4 };

/** The config.json `torch_dtype` of each dtype. */
export const torchDtype: Record<FloatDtype, string> = { f16: "float16", bf16: "bfloat16", f32: "float32" };

const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

/** IEEE half precision bits of `value`, rounded to nearest even. */
export function toFloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0] ?? 0;
  const sign = (x >>> 16) & 0x8000;
  const exponent = (x >>> 23) & 0xff;
  let mantissa = x & 0x7fffff;
  if (exponent === 0xff) return sign | 0x7c00 | (mantissa !== 0 ? 0x200 : 0);
  const e = exponent - 127 + 15;
  if (e >= 0x1f) return sign | 0x7c00;
  if (e <= 0) {
    if (e < -10) return sign;
    mantissa |= 0x800000;
    const shift = 14 - e;
    let half = mantissa >>> shift;
    const rest = mantissa & ((1 << shift) - 1);
    const halfway = 1 << (shift - 1);
    if (rest > halfway || (rest === halfway && (half & 1) === 1)) half += 1;
    return sign | half;
  }
  let half = (e << 10) | (mantissa >>> 13);
  const rest = mantissa & 0x1fff;
  if (rest > 0x1000 || (rest === 0x1000 && (half & 1) === 1)) half += 1;
  return sign | half;
}

/** bfloat16 bits of `value`, rounded to nearest even. */
export function toBfloat16Bits(value: number): number {
  f32[0] = value;
  const x = u32[0] ?? 0;
  if ((x & 0x7f800000) === 0x7f800000 && (x & 0x7fffff) !== 0) return 0x7fc0;
  const rounded = x + 0x7fff + ((x >>> 16) & 1);
  return (rounded >>> 16) & 0xffff;
}

/** Encode `values` as little-endian bytes of `dtype`. */
export function encodeFloats(values: Float32Array, dtype: FloatDtype): Buffer {
  const out = Buffer.alloc(values.length * dtypeBytes[dtype]);
  for (let i = 0; i < values.length; i++) {
    const v = values[i] ?? 0;
    if (dtype === "f32") out.writeFloatLE(v, i * 4);
    else out.writeUInt16LE(dtype === "f16" ? toFloat16Bits(v) : toBfloat16Bits(v), i * 2);
  }
  return out;
}
