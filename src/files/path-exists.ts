import { access, lstat } from "node:fs/promises";

/** True when `path` exists (anything: a file, a directory, a dangling-free symlink). Never throws. */
export async function pathExists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}

/** True when `path` names a directory entry, even a symbolic link to nothing. Never throws. */
export async function entryExists(path: string): Promise<boolean> {
  return lstat(path).then(
    () => true,
    () => false,
  );
}
