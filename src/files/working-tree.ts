/**
 * The git working tree a path lies in. Content of a working tree is anyone's who can commit there,
 * and git stores symbolic links: a committed link must not make the daemon read another file of
 * this machine (a token, a key) and show or copy it.
 */
import { lstat, realpath } from "node:fs/promises";
import { dirname, resolve, sep } from "node:path";

/** The real path of the working tree `dir` is in (found by a `.git` entry above it, as written), or undefined. */
export async function workingTreeOf(dir: string): Promise<string | undefined> {
  for (let at = resolve(dir); ; at = dirname(at)) {
    // Asked off the main thread: a synchronous look at a folder on a frozen network mount would stop
    // the whole process, where this one waits alone (and a caller's deadline can give up on it).
    if (
      await lstat(`${at}${sep}.git`).then(
        () => true,
        () => false,
      )
    )
      return realpath(at);
    if (dirname(at) === at) return undefined;
  }
}

/** Whether real path `real` is `root` or lies under it. */
export function isWithin(root: string, real: string): boolean {
  return real === root || real.startsWith(`${root}${sep}`);
}
