/**
 * The files one stage needs: the weight files the planner assigns it (filesForStage) plus the small
 * files every node reads (isModelMetadataFile: config, index, tokenizer, chat template).
 */
import { isModelMetadataFile } from "./metadata-files.js";
import type { Manifest } from "./types.js";

export function stageFileList(manifest: Manifest, weightFiles: readonly string[]): string[] {
  const small = manifest.files.filter((f) => isModelMetadataFile(f.path)).map((f) => f.path);
  return [...new Set([...weightFiles, ...small])].sort();
}
