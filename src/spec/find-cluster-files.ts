/** The cluster definitions of a directory. */
import type { Dirent } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { ShardctlError } from "../errors/index.js";

/**
 * `*.toml` files directly in `dir` (not recursive, not hidden), sorted by name, joined onto `dir`: regular
 * files and symbolic links to regular files. A link that resolves to nothing (dangling, looping) is
 * listed too, so that reading it reports the broken link instead of the definition vanishing; an
 * entry that is, or links to, a directory, FIFO, socket or device is not a definition. Throws
 * ShardctlError `DefinitionsDirMissing` when `dir` does not exist or is not a directory.
 */
export async function findClusterFiles(dir: string): Promise<string[]> {
  // Hidden entries are never definitions: editors keep their own beside the file they edit (Emacs's
  // lock `.#alpha.toml` is a symbolic link to nothing, which would otherwise be a broken cluster).
  const entries = (await listDirectory(dir)).filter((entry) => entry.name.endsWith(".toml") && !entry.name.startsWith("."));
  const kept = await Promise.all(entries.map(async (entry) => ((await isDefinitionEntry(dir, entry)) ? entry.name : undefined)));
  return kept
    .filter((name) => name !== undefined)
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

/** A regular file, or a symbolic link to one or to nothing. */
async function isDefinitionEntry(dir: string, entry: Dirent): Promise<boolean> {
  if (entry.isFile()) return true;
  if (!entry.isSymbolicLink()) return false;
  return stat(join(dir, entry.name)).then(
    (target) => target.isFile(),
    () => true,
  );
}
