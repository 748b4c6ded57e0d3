/**
 * Where a file the build makes (the engine's program, the dashboard's page) is, given the module
 * that needs it and the file's path relative to that module. shard-engine keeps a copy of its own
 * (src/engine/built-file.ts): it imports nothing of the control plane.
 */
import { existsSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/**
 * `path` (relative to `moduleUrl`, the caller's `import.meta.url`) beside the module in the build.
 * Run from source (vitest runs the .ts files, where nothing is compiled), the same file in the
 * repository's dist/.
 */
export function builtFile(moduleUrl: string, path: string): string {
  const beside = fileURLToPath(new URL(path, moduleUrl));
  if (existsSync(beside) || !moduleUrl.endsWith(".ts")) return beside;
  return join(repositoryRoot, "dist", relative(repositoryRoot, beside));
}

/** This file is src/files/built-file.ts in the repository (only asked when run from source). */
const repositoryRoot = fileURLToPath(new URL("../../", import.meta.url));
