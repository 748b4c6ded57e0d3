import { access } from "node:fs/promises";

/** True when `path` exists (anything: a file, a directory, a dangling-free symlink). Never throws. */
export async function pathExists(path: string): Promise<boolean> {
  return access(path).then(
    () => true,
    () => false,
  );
}
