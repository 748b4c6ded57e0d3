/**
 * Whether a file or folder whose contents steer the daemon (its ledger, its state directory) may be
 * trusted as written by it: this process's user's or root's, and writable by its owner alone. One of
 * this user's that group or others may write loses that permission (a daemon started with umask
 * 000 made them so); one of root's that others may write, or of another user, is not trusted.
 */
import type { Stats } from "node:fs";
import { chmod } from "node:fs/promises";

/**
 * Why `path` (as `info` describes it) is not to be trusted, in words that follow its name
 * ("belongs to uid 1000, not to the daemon's user (uid 0)", "is writable by everyone"), or
 * undefined; group and other write are taken off one of this user's. Undefined where the system
 * has no uids.
 */
export async function untrustedOwner(path: string, info: Stats): Promise<string | undefined> {
  const uid = process.getuid?.();
  if (uid === undefined) return undefined;
  if (info.uid !== uid && info.uid !== 0) return `belongs to uid ${info.uid}, not to the daemon's user (uid ${uid})`;
  if ((info.mode & 0o022) === 0) return undefined;
  if (info.uid === uid) {
    await chmod(path, info.mode & 0o7755);
    return undefined;
  }
  return `is writable by ${(info.mode & 0o002) !== 0 ? "everyone" : "its group"}`;
}
