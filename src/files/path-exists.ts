import { access, lstat } from "node:fs/promises";

/** True when `path` exists (anything: a file, a directory, a dangling-free symlink). Never throws. */
export async function pathExists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/**
 * True when `path` names a directory entry, even a symbolic link to nothing; false only when there
 * is none (ENOENT, or ENOTDIR: a parent is a file). Any other failure (EACCES, ESTALE or EIO from a
 * network mount) is thrown: it says nothing of whether the entry is there, and a caller that took
 * it for "absent" would act on a file that may well exist.
 */
export async function entryExists(path: string): Promise<boolean> {
  try {
    await lstat(path);
    return true;
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    if (code === "ENOENT" || code === "ENOTDIR") return false;
    throw error;
  }
}
