/**
 * 65536-entry lookup tables from 16-bit float bits to f32 values. Weights stay in their stored
 * 16-bit form (half the memory of f32) and are widened in the inner loops through these tables.
 */

function buildF16Table(): Float32Array {
  const table = new Float32Array(65536);
  for (let bits = 0; bits < 65536; bits++) {
    const sign = bits & 0x8000 ? -1 : 1;
    const exponent = (bits >>> 10) & 0x1f;
    const mantissa = bits & 0x3ff;
    let value: number;
    if (exponent === 0) value = mantissa * 2 ** -24;
    else if (exponent === 0x1f) value = mantissa === 0 ? Infinity : NaN;
    else value = (1 + mantissa / 1024) * 2 ** (exponent - 15);
    table[bits] = sign * value;
  }
  return table;
}

function buildBf16Table(): Float32Array {
  const table = new Float32Array(65536);
  const words = new Uint32Array(table.buffer);
  for (let bits = 0; bits < 65536; bits++) words[bits] = bits << 16;
  return table;
}

/** IEEE half precision bits → f32. */
export const f16Table = buildF16Table();
/** bfloat16 bits → f32. */
export const bf16Table = buildBf16Table();
