/**
 * The files one stage needs: the weight files the planner assigns it (filesForStage) plus every file
 * that is not a safetensors shard (config, index, tokenizer, chat template: small, and the engine
 * reads them on every node).
 */
import type { Manifest } from "./types.js";

export function stageFileList(manifest: Manifest, weightFiles: readonly string[]): string[] {
  const small = manifest.files.filter((f) => !f.path.endsWith(".safetensors")).map((f) => f.path);
  return [...new Set([...weightFiles, ...small])].sort();
}
