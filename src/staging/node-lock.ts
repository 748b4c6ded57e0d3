/**
 * A lock on one file of a node, shared by every shardctl process that stages there: a daemon,
 * `shardctl stage` run beside it (the upgrade guide's pre-staging, still running when the commit
 * lands), a second daemon with another state directory, another control machine. Without it two
 * of them wrote one `blobs/<hash>.incomplete`: one renamed it into place while the other still
 * appended to it or went to rename it, and a push spliced two copies into one file.
 *
 * The lock is a directory made next to the file (`mkdir` is atomic on every POSIX file system) with
 * a `holder` file naming the process. Its holder touches `holder` every `refreshMs`; a lock whose
 * `holder` (or, before it was written, whose directory) has not changed for over two minutes by
 * the node's own clock is stale — its holder was killed or cut off — and is taken over by renaming
 * it aside first, which only one taker can do. A lock naming this very process is taken over at
 * once: callers hold the process's own lock of the file meanwhile (one pass per file), so it is a
 * leftover of an earlier pass whose removal failed (its connection dropped). So is one naming a
 * process of this machine that no longer runs (a daemon killed mid-staging and started again).
 * Each question is one shell script, so a node is asked once per attempt, not once per step.
 */
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import { ShardctlError } from "../errors/index.js";
import type { NodeAccess } from "../nodes/index.js";

export interface NodeLockOptions {
  /** Ends a wait for the lock (the caller's staging was stopped). */
  signal?: AbortSignal;
  /** Told once, when the lock is held by another process: its `holder` text. */
  onWait?: (holder: string) => void;
  /** How often the holder touches its lock, ms. Default 20000 (stale after two minutes untouched). */
  refreshMs?: number;
  /** How often a held lock is asked again, ms. Default 1000. */
  pollMs?: number;
}

/**
 * $1 = the lock directory, $2 = the holder text. Prints "acquired"; "retry" after taking over a
 * stale lock (or this process's own leftover); or "held" and the holder's text.
 */
const acquireScript = `lock=$1
if mkdir "$lock" 2>/dev/null; then printf '%s\\n' "$2" >"$lock/holder"; echo acquired; exit 0; fi
if [ -e "$lock/holder" ]; then
  if [ "$(cat "$lock/holder" 2>/dev/null)" = "$2" ]; then old=mine; else old=$(find "$lock/holder" -mmin +2 2>/dev/null); fi
else old=$(find "$lock" -maxdepth 0 -mmin +2 2>/dev/null); fi
if [ -n "$old" ]; then
  if mv "$lock" "$lock.stale.$$" 2>/dev/null; then rm -rf "$lock.stale.$$"; fi
  echo retry
  exit 0
fi
echo held
cat "$lock/holder" 2>/dev/null
exit 0`;

/** $1 = the lock directory, $2 = the holder text it must still name: moved aside and removed. */
const takeOverScript = `[ "$(cat "$1/holder" 2>/dev/null)" = "$2" ] || exit 0
if mv "$1" "$1.stale.$$" 2>/dev/null; then rm -rf "$1.stale.$$"; fi`;

/** The lock directory of a file on a node. */
export function lockPathOf(file: string): string {
  return `${file}.lock`;
}

/** What a lock says of this process: who holds it, for the one that waits. */
export function lockHolderText(): string {
  return `shardctl (pid ${process.pid} on ${hostname()})`;
}

/** Whether `holder` (a lock's text) names a process of this machine that no longer runs. */
function isGoneFromHere(holder: string): boolean {
  const named = /^shardctl \(pid (\d+) on (.+)\)$/.exec(holder);
  if (named === null || named[2] !== hostname()) return false;
  try {
    process.kill(Number(named[1]), 0);
    return false;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ESRCH";
  }
}

/**
 * Run `work` while holding the node lock of `file` (see the module's comment); the lock is removed
 * afterwards, however `work` ends. Callers hold this process's own lock of `file` meanwhile.
 */
export async function withNodeLock<T>(node: NodeAccess, file: string, work: () => Promise<T>, options: NodeLockOptions = {}): Promise<T> {
  const lock = lockPathOf(file);
  const holder = lockHolderText();
  let told = false;
  for (;;) {
    if (options.signal?.aborted === true) throw cancelled(node, file, options.signal);
    const answer = await node.run(["sh", "-c", acquireScript, "sh", lock, holder]);
    if (answer.exitCode !== 0) {
      throw new ShardctlError(
        "NodeFileError",
        `node ${node.config.name}: cannot take the lock ${lock}: ${answer.stderr.trim() || `exit ${answer.exitCode ?? answer.signal}`}`,
      );
    }
    const [state = "", ...rest] = answer.stdout.split("\n");
    if (state === "acquired") break;
    const named = rest.join(" ").trim();
    if (state === "held" && isGoneFromHere(named)) {
      await node.run(["sh", "-c", takeOverScript, "sh", lock, named]);
      continue;
    }
    if (state === "held" && !told) {
      told = true;
      options.onWait?.(named || "another shardctl process");
    }
    if (state !== "retry") await delay(options.pollMs ?? 1_000, undefined, options.signal === undefined ? {} : { signal: options.signal }).catch(() => undefined);
  }
  const refresh = setInterval(() => void node.run(["touch", "--", `${lock}/holder`]).catch(() => undefined), options.refreshMs ?? 20_000);
  try {
    return await work();
  } finally {
    clearInterval(refresh);
    await node.run(["rm", "-rf", "--", lock]).catch(() => undefined);
  }
}

function cancelled(node: NodeAccess, file: string, signal: AbortSignal): ShardctlError {
  const why = signal.reason instanceof Error ? signal.reason.message : "its caller stopped it";
  return new ShardctlError("StagingCancelled", `node ${node.config.name}: staging stopped while another process held ${file}: ${why}`);
}
