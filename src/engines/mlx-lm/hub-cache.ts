import { posix } from "node:path";
import type { ProcessFiles } from "../types.js";

/**
 * The `HF_HUB_CACHE` a rank is given: its launch's cache directory, written relative to the run
 * directory (every process starts there, and the cache directory sits in it). huggingface_hub
 * expands `$NAME` and `${NAME}` in the variable (os.path.expandvars, no escape), so a node whose
 * `model_dir` holds a `$` would send it to another directory that does not exist, and mlx-lm's
 * `/v1/models` would answer 200 with an empty body. A relative path holds no `$` from the node's
 * path; a cache directory outside the run directory is given as it is.
 */
export function selectHubCache(files: ProcessFiles): string {
  const relative = posix.relative(posix.dirname(files.clusterConfig), files.cacheDir);
  if (relative === "" || relative.startsWith("..") || posix.isAbsolute(relative)) return files.cacheDir;
  return `./${relative}`;
}
