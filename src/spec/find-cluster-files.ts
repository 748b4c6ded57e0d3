/** The cluster definitions of a directory. */
import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { ShardctlError } from "../errors/index.js";

/**
 * `*.toml` files directly in `dir` (not recursive), sorted by name, joined onto `dir`. Throws
 * ShardctlError `DefinitionsDirMissing` when `dir` does not exist or is not a directory.
 */
export async function findClusterFiles(dir: string): Promise<string[]> {
  const entries = await listDirectory(dir);
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith(".toml"))
    .map((entry) => entry.name)
    .sort()
    .map((name) => join(dir, name));
}

/** The error of a definitions directory that is not there, saying what to do. */
export function definitionsDirMissing(dir: string, cause?: unknown): ShardctlError {
  return new ShardctlError("DefinitionsDirMissing", `${dir} is not a directory of cluster definitions; create it or pass --dir <directory>`, {
    terminal: true,
    cause,
  });
}

async function listDirectory(dir: string): Promise<Dirent[]> {
  try {
    return await readdir(dir, { withFileTypes: true });
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") throw definitionsDirMissing(dir, error);
    throw error;
  }
}
