/** The cluster definitions of a directory. */
import type { Dirent } from "node:fs";
import { readdir } from "node:fs/promises";
import { join } from "node:path";
import { ShardctlError } from "../errors/index.js";

/**
 * `*.toml` entries directly in `dir` (not recursive, not hidden), sorted by name, joined onto `dir`.
 * Every one is a definition, whatever it is: one that is not a regular file (a directory, a FIFO, a
 * device, a link to nothing) is a broken definition that reading it reports, the same for the
 * daemon and every command, never one that vanishes (`diff` would propose a prune the daemon never
 * makes, and `validate` pass what the daemon calls invalid). Throws ShardctlError
 * `DefinitionsDirMissing` when `dir` does not exist or is not a directory.
 */
export async function findClusterFiles(dir: string): Promise<string[]> {
  // Hidden entries are never definitions: editors keep their own beside the file they edit (Emacs's
  // lock `.#alpha.toml` is a symbolic link to nothing, which would otherwise be a broken cluster).
  return (await listDirectory(dir))
    .filter((entry) => entry.name.endsWith(".toml") && !entry.name.startsWith("."))
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
