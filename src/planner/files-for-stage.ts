import type { ModelProfile } from "./model-profile.js";

/** A stage's share of the model: half-open layer range, and whether it is the first/last stage. */
export interface StageShape {
  layers: [start: number, end: number];
  first: boolean;
  last: boolean;
  /** Every stage keeps the embedding, final norm and lm_head (the engine's `nonLayerTensors`). */
  keepsEnds?: boolean;
}

/**
 * The safetensors files (plus config and index) a stage needs to load its layers [start, end):
 * the files holding those layers, the embedding on the first stage — and on the last when the
 * embedding is tied to the output head —, final norm and lm_head on the last; every one of them, and
 * every file holding another tensor outside the layers, on every stage of an engine whose stages all
 * keep them (mlx-lm, which loads each such file on every rank).
 * Paths are relative to the model root, sorted.
 */
export function filesForStage(profile: ModelProfile, stage: StageShape): string[] {
  const [start, end] = stage.layers;
  if (stage.keepsEnds === true) stage = { ...stage, first: true, last: true };
  const tied = profile.config.tieWordEmbeddings || profile.lmHeadBytes === 0;
  const keepsOther = stage.keepsEnds === true;
  const needed = profile.files.filter(
    (f) =>
      f.layers.some((l) => l >= start && l < end) ||
      (f.embedding && (stage.first || (stage.last && tied))) ||
      (stage.last && (f.norm || f.lmHead)) ||
      (keepsOther && f.other),
  );
  return needed.map((f) => f.path).sort();
}
