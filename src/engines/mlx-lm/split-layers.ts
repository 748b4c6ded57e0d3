/**
 * mlx-lm's pipeline split (`PipelineMixin.pipeline` of mlx-lm 0.32.2), read in layer order. mlx-lm
 * splits in reverse: rank 0 holds the LAST layers (and serves HTTP), rank N-1 the first. Rank r
 * takes ⌊L/N⌋ layers, one more when r < L mod N; so in layer order the extra layers sit at the end
 * (61 layers on 2 ranks: stage 0 = rank 1 takes 30, stage 1 = rank 0 takes 31).
 */
export function mlxLmSplit(layers: number, stages: number): number[] {
  if (!Number.isInteger(layers) || !Number.isInteger(stages) || layers < 0 || stages < 1) {
    throw new RangeError(`mlxLmSplit needs layers ≥ 0 and stages ≥ 1, got ${layers} and ${stages}`);
  }
  const base = Math.floor(layers / stages);
  const extra = layers % stages;
  return Array.from({ length: stages }, (_, stage) => base + (rankOfStage(stage, stages) < extra ? 1 : 0));
}

/** The ring rank of the stage at `stage` in layer order (stage 0 = first layers = rank N-1). */
export function rankOfStage(stage: number, stages: number): number {
  return stages - 1 - stage;
}
