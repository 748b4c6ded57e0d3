/**
 * Status files are what the daemon last wrote. What `status` and `wait` say when no daemon keeps
 * them current: none watches the directory, or the one that holds it is silent (stopped or hung;
 * see the daemon lock's heartbeat).
 */
import { describeSilence, type DaemonSighting } from "../reconciler/index.js";

/**
 * The line to print for `daemon` (findDaemon's answer for `dir`), or undefined when it keeps the
 * files current. `written`: whether any status file is there to be described as the last word.
 */
export function describeKeeper(dir: string, daemon: DaemonSighting | undefined, written = true): string | undefined {
  if (daemon === undefined && !written) return `note: no shardctl daemon is watching ${dir}: nothing runs these definitions until one does (shardctl daemon)`;
  if (daemon === undefined) return `note: no shardctl daemon is watching ${dir}; this is the status it last wrote`;
  if (daemon.silent)
    return `warning: the shardctl daemon watching ${dir} (${describeSilence(daemon)}) keeps no status current; this is what it last wrote, not what runs now`;
  return undefined;
}
