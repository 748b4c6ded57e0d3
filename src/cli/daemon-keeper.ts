/**
 * Status files are what the daemon last wrote. What `status` and `wait` say when no daemon keeps
 * them current: none watches the directory, the one that holds it is silent (stopped or hung; see
 * the daemon lock's heartbeat), or it runs but the disk under the files is full.
 */
import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import { roomLeft } from "../files/index.js";
import { formatBytes } from "../planner/index.js";
import { describeSilence, type DaemonSighting } from "../reconciler/index.js";

/**
 * The line to print for `daemon` (findDaemon's answer for `dir`), or undefined when it keeps the
 * files current. `written`: whether any status file is there to be described as the last word.
 */
export async function describeKeeper(dir: string, daemon: DaemonSighting | undefined, written = true): Promise<string | undefined> {
  if (daemon === undefined && !written) return `note: no shardctl daemon is watching ${dir}: nothing runs these definitions until one does (shardctl daemon)`;
  if (daemon === undefined) return `note: no shardctl daemon is watching ${dir}; this is the status it last wrote`;
  if (daemon.silent)
    return `warning: the shardctl daemon watching ${dir} (${describeSilence(daemon)}) keeps no status current; this is what it last wrote, not what runs now`;
  const refused = written ? await statusWritesRefused(dir, daemon) : undefined;
  if (refused !== undefined) return `warning: ${refused}; if it could not, this is what it last wrote, which may not be what runs now`;
  return undefined;
}

/** Room a status write needs beyond the file it replaces, bytes: a block, for rounding. */
const writeSlackBytes = 4096;

/**
 * Why the daemon watching `dir` may be unable to write status files there now: the file system
 * holding them has less room, for the daemon's user, than the largest of them takes (a status file
 * is replaced by a whole new one, when what it says changes). Its heartbeat only sets a time, which
 * a full disk does not refuse, so it is not silent. A hint, not a finding: a status that did not
 * change since needed no write. Undefined when there is room, or the system does not say.
 */
export async function statusWritesRefused(dir: string, daemon: DaemonSighting): Promise<string | undefined> {
  const room = await roomLeft(dir, daemon.uid);
  if (room === undefined) return undefined;
  const names = await readdir(dir).catch(() => [] as string[]);
  const sizes = await Promise.all(
    names
      .filter((n) => n.endsWith(".status.json"))
      .map((n) =>
        stat(join(dir, n)).then(
          (s) => s.size,
          () => 0,
        ),
      ),
  );
  const needed = Math.max(0, ...sizes) + writeSlackBytes;
  if (room >= needed) return undefined;
  return `the file system holding ${dir} has ${formatBytes(room)} free, less than a status file takes (${formatBytes(needed)}): the shardctl daemon watching it (pid ${daemon.pid}) may be unable to write its status files there (its log says "could not write the status file" when it is); free space, and it writes them again at its next try`;
}
