// One row of a weight matrix as f32 (an embedding lookup): exactly the stored values.
import { bf16ToF32, floatAt, halfToF32, KIND_F16, KIND_F32 } from "./convert";

/** Row `row` of float weights `[out, in]` of `kind` into `dst` (in f32), specials put back. */
export function readRowFloat(kind: i32, w: usize, inN: i32, row: i32, dst: usize, rowPtr: usize, entries: usize): void {
  const base = <usize>row * <usize>inN;
  for (let i = 0; i < inN; i++) {
    const at = base + <usize>i;
    let v: f32;
    if (kind == KIND_F32) v = load<f32>(w + (at << 2));
    else if (kind == KIND_F16) v = halfToF32(<u32>load<u16>(w + (at << 1)));
    else v = bf16ToF32(<u32>load<u16>(w + (at << 1)));
    store<f32>(dst + (<usize>i << 2), v);
  }
  if (rowPtr == 0) return;
  const end = load<u32>(rowPtr + (<usize>row << 2), 4);
  for (let k = load<u32>(rowPtr + (<usize>row << 2)); k < end; k++) {
    const e = entries + (<usize>k << 3);
    store<f32>(dst + (<usize>load<u32>(e) << 2), load<f32>(e, 4));
  }
}

/** Row `row` of quantized weights, dequantized: scale × q + bias, rounded once to f32. */
export function readRowQuant(bits: i32, w: usize, scaleKind: i32, scales: usize, biases: usize, groupSize: i32, inN: i32, row: i32, dst: usize): void {
  const perWord = 32 / bits;
  const mask: u32 = (1 << bits) - 1;
  const groups = inN / groupSize;
  const wordBase = <usize>row * <usize>(inN / perWord);
  for (let i = 0; i < inN; i++) {
    const word = load<u32>(w + ((wordBase + <usize>(i / perWord)) << 2));
    const q = (word >> (<u32>(i % perWord) * <u32>bits)) & mask;
    const gi = <usize>row * <usize>groups + <usize>(i / groupSize);
    const s = <f64>floatAt(scaleKind, scales, gi);
    const b = <f64>floatAt(scaleKind, biases, gi);
    store<f32>(dst + (<usize>i << 2), <f32>(s * <f64>q + b));
  }
}
