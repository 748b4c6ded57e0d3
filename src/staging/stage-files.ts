/**
 * The files one stage needs: the weight files the planner assigns it (filesForStage) plus the small
 * files every node reads (isModelMetadataFile: config, index, tokenizer, chat template).
 */
import { ShardctlError } from "../errors/index.js";
import { isModelMetadataFile } from "./metadata-files.js";
import type { Manifest } from "./types.js";

/**
 * Most small files staged on a node (1000). A model has a handful (config, index, tokenizer, chat
 * template); each is checked, locked and linked on every node, a few round trips apiece, so a
 * repository listing thousands (a hostile or mistaken one) would take hours to stage.
 */
export const maxModelMetadataFiles = 1000;

export function stageFileList(manifest: Manifest, weightFiles: readonly string[]): string[] {
  const small = manifest.files.filter((f) => isModelMetadataFile(f.path)).map((f) => f.path);
  if (small.length > maxModelMetadataFiles) {
    throw new ShardctlError(
      "TooManyModelFiles",
      `${manifest.repo}: lists ${small.length} small files every node would get (JSON, tokenizer and template files, e.g. ${small[0]}); a model has a handful, and at most ${maxModelMetadataFiles} are staged: point [model] id at the model itself`,
      { terminal: true },
    );
  }
  return [...new Set([...weightFiles, ...small])].sort();
}
