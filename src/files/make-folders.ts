/**
 * `mkdir -p` that says why. Node's recursive mkdir answers ENOENT when a folder cannot be made on a
 * read-only file system (it retries the parent, which exists, and reports the first error it met):
 * "no such file or directory" for a folder whose parent is right there sends an operator looking
 * for a typo. The folder below the deepest one that exists is made again on its own, and its error
 * (EROFS, EACCES, ENOSPC…) is the one thrown.
 */
import { mkdir, stat } from "node:fs/promises";
import { dirname } from "node:path";

export async function makeFolders(path: string, mode?: number): Promise<void> {
  try {
    await mkdir(path, { recursive: true, ...(mode === undefined ? {} : { mode }) });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    let missing = path;
    while (dirname(missing) !== missing && (await stat(dirname(missing)).catch(() => undefined)) === undefined) missing = dirname(missing);
    // The first folder to make: its own error, when it is not ENOENT too.
    throw await mkdir(missing, mode === undefined ? {} : { mode }).then(
      () => error,
      (cause: NodeJS.ErrnoException) => (cause.code === "ENOENT" ? error : cause),
    );
  }
}
