/**
 * mlxcel's own dense split, which it cannot be told to change: stages 0..N-2 take ceil(L/N)
 * layers each and the last takes the rest (16/2 → 8,8; 27/2 → 14,13; 10/4 → 3,3,3,1). Returns
 * layer counts per stage; a count ≤ 0 means the split leaves that stage without layers.
 */
export function mlxcelSplit(layers: number, stages: number): number[] {
  if (!Number.isInteger(layers) || !Number.isInteger(stages) || layers < 0 || stages < 1) {
    throw new RangeError(`mlxcelSplit needs layers ≥ 0 and stages ≥ 1, got ${layers} and ${stages}`);
  }
  const per = Math.ceil(layers / stages);
  const counts: number[] = [];
  let left = layers;
  for (let i = 0; i < stages; i++) {
    const take = i === stages - 1 ? left : Math.min(per, Math.max(left, 0));
    counts.push(take);
    left -= take;
  }
  return counts;
}
