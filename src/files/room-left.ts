/**
 * How many bytes a user may still write in the file system that holds a folder, from statfs(2):
 * root may use the blocks a file system keeps back for it (ext4 keeps 5 % by default), any other
 * user may not. A write of a new file needs its whole size free before the old one is replaced.
 */
import { statfs } from "node:fs/promises";

/** Bytes free in the file system of `dir` for a process of user `uid` (root: 0); undefined when the system does not say. */
export async function roomLeft(dir: string, uid: number | undefined): Promise<number | undefined> {
  const fs = await statfs(dir).catch(() => undefined);
  if (fs === undefined) return undefined;
  return (uid === 0 ? fs.bfree : fs.bavail) * fs.bsize;
}
