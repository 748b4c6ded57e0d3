/**
 * Which repository files every node gets besides its weights: the small files the engine reads
 * (config, generation config, safetensors index, tokenizer, chat template). Everything else a model
 * repository carries — README, .gitattributes, images, other weight formats (*.bin, *.pth, *.gguf),
 * the original/ checkpoint — is not needed to serve the safetensors model and is never staged.
 */
import { posix } from "node:path";

export function isModelMetadataFile(path: string): boolean {
  // Meta's original checkpoint (consolidated.*.pth, params.json, tokenizer.model) lives there.
  if (path === "original" || path.startsWith("original/")) return false;
  const name = posix.basename(path);
  if (name.endsWith(".json") || name.endsWith(".jinja") || name.endsWith(".tiktoken")) return true;
  if (name === "tokenizer.model") return true;
  // vocab.txt, merges.txt and the like; not README.txt or LICENSE.txt.
  return name.endsWith(".txt") && /vocab|merges/i.test(name);
}
