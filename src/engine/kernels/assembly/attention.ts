// Causal grouped-query attention over an f32 key/value cache. Each (row, head) pair is one task,
// computed whole by one thread, so threads never change a result.
import { lanesSum } from "./convert";

/**
 * Tasks [tStart, tEnd) of rows × heads: query row r (at position start + r) of head h attends
 * over cached positions 0..start + r. `q` and `out` are `rows × heads × headDim` f32; `keys` and
 * `values` hold `kvHeads × headDim` f32 per position; `scores` is per-thread scratch of
 * (start + rows) f32. `scale` is 1/√headDim.
 */
export function attention(
  q: usize,
  keys: usize,
  values: usize,
  out: usize,
  start: i32,
  heads: i32,
  kvHeads: i32,
  headDim: i32,
  scale: f32,
  scores: usize,
  tStart: i32,
  tEnd: i32,
): void {
  const group = heads / kvHeads;
  const kvStride = <usize>(kvHeads * headDim) << 2;
  const vecEnd = headDim & ~3;
  for (let t = tStart; t < tEnd; t++) {
    const r = t / heads;
    const h = t % heads;
    const last = start + r;
    const qRow = q + (<usize>(r * heads + h) * <usize>headDim << 2);
    const kvOff = <usize>((h / group) * headDim) << 2;
    let max: f32 = -Infinity;
    let kRow = keys + kvOff;
    for (let j = 0; j <= last; j++) {
      let a = f32x4.splat(0);
      for (let i = 0; i < vecEnd; i += 4) a = f32x4.add(a, f32x4.mul(v128.load(qRow + (<usize>i << 2)), v128.load(kRow + (<usize>i << 2))));
      let dot = lanesSum(a);
      for (let i = vecEnd; i < headDim; i++) dot += load<f32>(qRow + (<usize>i << 2)) * load<f32>(kRow + (<usize>i << 2));
      const score = dot * scale;
      store<f32>(scores + (<usize>j << 2), score);
      if (score > max) max = score;
      kRow += kvStride;
    }
    let sum: f32 = 0;
    for (let j = 0; j <= last; j++) {
      const e = Mathf.exp(load<f32>(scores + (<usize>j << 2)) - max);
      store<f32>(scores + (<usize>j << 2), e);
      sum += e;
    }
    const outRow = out + (<usize>(r * heads + h) * <usize>headDim << 2);
    // Weighted sum of the values, 32 dimensions per pass held in eight registers; what a pass
    // does not cover (head sizes not a multiple of 32) goes through memory below. Each output
    // lane sums over positions in order either way.
    const passEnd = headDim & ~31;
    for (let d0 = 0; d0 < passEnd; d0 += 32) {
      let o0 = f32x4.splat(0);
      let o1 = f32x4.splat(0);
      let o2 = f32x4.splat(0);
      let o3 = f32x4.splat(0);
      let o4 = f32x4.splat(0);
      let o5 = f32x4.splat(0);
      let o6 = f32x4.splat(0);
      let o7 = f32x4.splat(0);
      let vp = values + kvOff + (<usize>d0 << 2);
      for (let j = 0; j <= last; j++) {
        const wv = f32x4.splat(load<f32>(scores + (<usize>j << 2)) / sum);
        o0 = f32x4.add(o0, f32x4.mul(wv, v128.load(vp)));
        o1 = f32x4.add(o1, f32x4.mul(wv, v128.load(vp, 16)));
        o2 = f32x4.add(o2, f32x4.mul(wv, v128.load(vp, 32)));
        o3 = f32x4.add(o3, f32x4.mul(wv, v128.load(vp, 48)));
        o4 = f32x4.add(o4, f32x4.mul(wv, v128.load(vp, 64)));
        o5 = f32x4.add(o5, f32x4.mul(wv, v128.load(vp, 80)));
        o6 = f32x4.add(o6, f32x4.mul(wv, v128.load(vp, 96)));
        o7 = f32x4.add(o7, f32x4.mul(wv, v128.load(vp, 112)));
        vp += kvStride;
      }
      const at = outRow + (<usize>d0 << 2);
      v128.store(at, o0);
      v128.store(at, o1, 16);
      v128.store(at, o2, 32);
      v128.store(at, o3, 48);
      v128.store(at, o4, 64);
      v128.store(at, o5, 80);
      v128.store(at, o6, 96);
      v128.store(at, o7, 112);
    }
    if (passEnd == headDim) continue;
    memory.fill(outRow + (<usize>passEnd << 2), 0, <usize>(headDim - passEnd) << 2);
    let vRow = values + kvOff;
    for (let j = 0; j <= last; j++) {
      const weight = load<f32>(scores + (<usize>j << 2)) / sum;
      const wv = f32x4.splat(weight);
      for (let i = passEnd; i < vecEnd; i += 4) {
        const at = outRow + (<usize>i << 2);
        v128.store(at, f32x4.add(v128.load(at), f32x4.mul(wv, v128.load(vRow + (<usize>i << 2)))));
      }
      for (let i = vecEnd; i < headDim; i++) {
        const at = outRow + (<usize>i << 2);
        store<f32>(at, load<f32>(at) + weight * load<f32>(vRow + (<usize>i << 2)));
      }
      vRow += kvStride;
    }
  }
}
