/**
 * The state directory decides what the daemon does to processes and folders: its ledger names the
 * pids it signals and the run folders it removes, as its own user (root, often). So the daemon
 * starts only on a state directory, and a ledger folder, that are its user's own (or root's), and
 * takes group and other write permission off them: a daemon started with umask 000 once made them
 * writable by all, and an entry another user wrote there had a prune empty /tmp. The requests
 * folder keeps its permissions: `shardctl reconcile` writes there for whoever the operator lets ask.
 */
import { lstat, stat } from "node:fs/promises";
import { join } from "node:path";
import { ShardctlError } from "../errors/index.js";
import { untrustedOwner } from "../files/index.js";

/** The folders guarded: the state directory and the ledger in it. */
function guardedFolders(stateDir: string): string[] {
  return [stateDir, join(stateDir, "ledger")];
}

/**
 * Refuse (StateDirUnsafe, terminal) a guarded folder of another user than this process's or root's,
 * or a ledger folder that is a symbolic link; take group and other write off those of this user.
 * Folders not there yet are left to be made (with the daemon's umask, which masks them).
 */
export async function guardStateDir(stateDir: string, settingsFile: string): Promise<void> {
  for (const folder of guardedFolders(stateDir)) {
    // The state directory may be reached through a link (its target is judged); the ledger may not.
    const info = await (folder === stateDir ? stat(folder) : lstat(folder)).catch(() => undefined);
    if (info === undefined) continue;
    if (info.isSymbolicLink()) throw unsafe(settingsFile, folder, "is a symbolic link");
    const untrusted = await untrustedOwner(folder, info);
    if (untrusted !== undefined) throw unsafe(settingsFile, folder, untrusted);
  }
}

function unsafe(settingsFile: string, folder: string, why: string): ShardctlError {
  return new ShardctlError(
    "StateDirUnsafe",
    `${settingsFile}: [daemon] state_dir: ${folder} ${why}; its ledger names the processes this daemon signals and the folders it removes, so it must be the daemon's user's own (or root's) and writable by it alone: chown it to that user, or set state_dir to a folder it owns`,
    { terminal: true },
  );
}
