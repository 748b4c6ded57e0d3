/**
 * A lock on one file of a node, shared by every shardctl process that stages there: a daemon,
 * `shardctl stage` run beside it (the upgrade guide's pre-staging, still running when the commit
 * lands), a second daemon with another state directory, another control machine. Without it two
 * of them wrote one `blobs/<hash>.incomplete`: one renamed it into place while the other still
 * appended to it or went to rename it, and a push spliced two copies into one file.
 *
 * The lock is a directory made next to the file (`mkdir` is atomic on every POSIX file system) with
 * a `holder` file naming the process (its pid, host, pid namespace and a random token of its own,
 * so no two processes ever name themselves alike) and a `beat` file holding a count. Every
 * `refreshMs` its holder, while `holder` still names it, touches `holder` and writes the next count
 * to `beat`. A lock whose beat has not changed for two minutes of its waiter's own monotonic time is
 * stale — its holder was killed or cut off — and is taken over: the node's clock plays no part, so
 * a node whose clock steps forward (an NTP correction, a VM resumed) cannot make a live holder's
 * lock look old and let a second writer in. A lock without a beat (made by an earlier shardctl) is
 * judged as it judged: stale when `holder` (or, before it was written, the directory) has not
 * changed for over two minutes by the node's clock. So is one naming this very process (callers hold the process's own lock
 * of the file meanwhile, so it is a leftover of an earlier pass whose removal failed with its
 * connection) and one naming a process of this machine and pid namespace that no longer runs (a
 * daemon killed mid-staging and started again). A takeover moves the lock aside and keeps it only
 * if what it moved is what it judged (another taker may have made a fresh lock in between). A
 * holder removes its lock only while it still names it. Each question is one shell script.
 */
import { randomBytes } from "node:crypto";
import { readlinkSync } from "node:fs";
import { hostname } from "node:os";
import { setTimeout as delay } from "node:timers/promises";
import { ShardctlError } from "../errors/index.js";
import { commandFailed, untilAborted, type CommandResult, type NodeAccess } from "../nodes/index.js";
import { lookAtProcess } from "../local-processes/index.js";

export interface NodeLockOptions {
  /** Ends a wait for the lock (the caller's staging was stopped). */
  signal?: AbortSignal;
  /** Told once, when the lock is held by another process: its `holder` text (one line, at most 160 characters). */
  onWait?: (holder: string) => void;
  /** How often the holder touches and beats its lock, ms. Default 20000 (stale once its beat stands still for two minutes). */
  refreshMs?: number;
  /** How often a held lock is asked again, ms. Default 1000. */
  pollMs?: number;
  /** How long a held lock's beat must stay unchanged, as this process watches it, before it is stale, ms. Default 120000. */
  staleMs?: number;
}

/**
 * $1 = the lock directory, $2 = this process's holder text, $3 = a holder text judged gone (or ""),
 * $4 = the beat it was judged gone at. Prints "acquired"; "retry" after taking over a stale lock;
 * or "held", the holder's first line and its beat ("" for a lock without one). Exits 2, saying why,
 * when the lock can be neither made nor found (a folder that cannot be written), or made but not
 * named (a full disk: a lock naming nobody would be waited for): no holder to wait for.
 */
export const acquireScript = `lock=$1 me=$2 gone=$3 gonebeat=$4
# A write to a caller that is gone (its channel closed as it stopped) fails rather than kills the
# shell: a lock made for nobody is then removed at once.
trap '' PIPE
for attempt in 1 2; do
  if err=$(mkdir "$lock" 2>&1); then
    # tee, not the shell's printf: it says why a write failed (No space left on device).
    if err=$(printf '%s\\n' "$me" | tee "$lock/holder" 2>&1 >/dev/null) && err=$(echo 0 | tee "$lock/beat" 2>&1 >/dev/null); then
      echo acquired && exit 0
      rm -rf "$lock"
      exit 2
    fi
    rm -rf "$lock"
    printf 'cannot write %s: %s\\n' "$lock" "$err" >&2
    exit 2
  fi
  [ -d "$lock" ] && break
  if [ "$attempt" = 2 ]; then printf 'cannot make %s: %s\\n' "$lock" "$err" >&2; exit 2; fi
done
holder=$(head -n 1 "$lock/holder" 2>/dev/null)
beat=$(head -n 1 "$lock/beat" 2>/dev/null)
stale=
if [ -n "$holder" ] && { [ "$holder" = "$me" ] || { [ "$holder" = "$gone" ] && [ "$beat" = "$gonebeat" ]; }; }; then stale=1
elif [ -e "$lock/beat" ]; then :
elif [ -e "$lock/holder" ]; then [ -n "$(find "$lock/holder" -mmin +2 2>/dev/null)" ] && stale=1
else [ -n "$(find "$lock" -maxdepth 0 -mmin +2 2>/dev/null)" ] && stale=1; fi
if [ -n "$stale" ]; then
  aside="$lock.stale.$$"
  if mv "$lock" "$aside" 2>/dev/null; then
    if { [ "$(head -n 1 "$aside/holder" 2>/dev/null)" = "$holder" ] && [ "$(head -n 1 "$aside/beat" 2>/dev/null)" = "$beat" ]; } || [ -e "$lock" ]; then rm -rf "$aside"; else mv "$aside" "$lock"; fi
  fi
  echo retry
  exit 0
fi
echo held
printf '%s\\n' "$holder"
# "b:" and the beat when the lock has a beat file (even an empty one), nothing when it has none.
if [ -e "$lock/beat" ]; then printf 'b:%s\\n' "$beat"; else echo; fi`;

/** $1 = the lock directory, $2 = the holder text, $3 = the next beat: touched and beaten while it still names that holder. */
const refreshScript = `[ "$(head -n 1 "$1/holder" 2>/dev/null)" = "$2" ] && touch "$1/holder" && printf '%s\\n' "$3" > "$1/beat.$$" && mv -f "$1/beat.$$" "$1/beat"; rm -f "$1/beat.$$"; exit 0`;

/** $1 = the lock directory, $2 = the holder text: removed while it still names that holder. */
const releaseScript = `[ "$(head -n 1 "$1/holder" 2>/dev/null)" = "$2" ] || exit 0
mv "$1" "$1.released.$$" 2>/dev/null && rm -rf "$1.released.$$"
exit 0`;

/** The lock directory of a file on a node. */
export function lockPathOf(file: string): string {
  return `${file}.lock`;
}

/** This process's pid namespace (Linux), so a pid is judged only where it means the same process. */
function pidNamespace(): string | undefined {
  try {
    return /\[(\d+)\]/.exec(readlinkSync("/proc/self/ns/pid"))?.[1];
  } catch {
    return undefined;
  }
}

const token = randomBytes(6).toString("hex");

/** What a lock says of this process: who holds it, for the one that waits (unique to this process). */
export function lockHolderText(): string {
  const ns = pidNamespace();
  return `shardctl (pid ${process.pid} on ${hostname()}${ns === undefined ? "" : `, pid namespace ${ns}`}, ${token})`;
}

/** Whether `holder` (a lock's text) names a process of this machine and pid namespace that no longer runs (gone, or a zombie). */
async function isGoneFromHere(holder: string): Promise<boolean> {
  const named = /^shardctl \(pid (\d+) on (.+?)(?:, pid namespace (\d+))?, [0-9a-f]+\)$/.exec(holder);
  if (named === null || named[2] !== hostname() || named[3] !== pidNamespace()) return false;
  return !(await lookAtProcess(Number(named[1]))).runs;
}

/**
 * Run `work` while holding the node lock of `file` (see the module's comment); the lock is removed
 * afterwards, however `work` ends, while it still names this process. Callers hold this process's
 * own lock of `file` meanwhile.
 */
export function withNodeLock<T>(node: NodeAccess, file: string, work: () => Promise<T>, options: NodeLockOptions = {}): Promise<T> {
  // Tracked until it has given its lock back (settleLockReleases), however it ends.
  const held = holdNodeLock(node, file, work, options);
  const settled = held.then(
    () => undefined,
    () => undefined,
  );
  pendingReleases.add(settled);
  void settled.finally(() => pendingReleases.delete(settled));
  return held;
}

async function holdNodeLock<T>(node: NodeAccess, file: string, work: () => Promise<T>, options: NodeLockOptions): Promise<T> {
  const lock = lockPathOf(file);
  const me = lockHolderText();
  const { signal } = options;
  let told = false;
  let gone = "";
  let goneBeat = "";
  let takeovers = 0;
  // The holder and beat last seen, and since when (performance.now(), ms) they have not changed.
  let watched: { holder: string; beat: string; since: number } | undefined;
  const staleMs = options.staleMs ?? 120_000;
  const key = givingBackKey(node, lock);
  for (;;) {
    // A lock this process is still giving back is gone before it is asked for again: asked
    // meanwhile, it would name this process, be taken over as an earlier pass's leftover, and then
    // be removed under the new holder by that give-back.
    await untilStopped(givingBack.get(key) ?? Promise.resolve(), signal);
    if (isAborted(signal)) throw cancelled(node, file, signal!);
    // Not cut by a stop: the caller hears at once, and a lock the command makes is given back once
    // it has answered. Cut instead (its process group killed on the node), it raced its kill and
    // the releases sent after it: a node slow to start the command's shell (its load, its start-up
    // files) made the lock after they had looked, and it stayed until taken over as stale.
    const asking = node.run(["sh", "-c", acquireScript, "sh", lock, me, gone, goneBeat]);
    const answer = await untilStopped(asking, signal);
    if (answer === undefined || isAborted(signal)) {
      giveBack(
        key,
        asking.then(
          (asked) => (madeNoLock(asked) ? undefined : release(node, lock, me)),
          () => release(node, lock, me),
        ),
      );
      throw cancelled(node, file, signal!);
    }
    const [state = "", first = "", beatLine = ""] = answer.stdout.split("\n");
    // The beat as the lock holds it (empty for an empty file), and whether it has a beat file at all.
    const beating = beatLine.startsWith("b:");
    const beat = beating ? beatLine.slice(2) : "";
    if (answer.exitCode !== 0) {
      // A node that did not answer is unreachable (a partition), not a file error.
      throw commandFailed(node.config.name, answer.timedOut ? "NodeUnreachable" : "NodeFileError", `taking the lock ${lock}`, answer);
    }
    if (state === "acquired") break;
    const holder = first.trim();
    if (state === "held" && holder !== "" && holder !== gone && (await isGoneFromHere(holder))) {
      [gone, goneBeat] = [holder, beat];
      continue;
    }
    // A beating lock whose beat stood still for staleMs of this process's watch: its holder stopped.
    if (state === "held" && holder !== "" && beating) {
      if (watched?.holder !== holder || watched.beat !== beat) watched = { holder, beat, since: performance.now() };
      else if (performance.now() - watched.since >= staleMs && (holder !== gone || beat !== goneBeat)) {
        [gone, goneBeat] = [holder, beat];
        continue;
      }
    }
    if (state === "held" && !told) {
      told = true;
      options.onWait?.(holder.slice(0, 160) || "another shardctl process");
    }
    // After a takeover, at once (a few times: one that keeps failing, a lock that cannot be moved,
    // is asked at the poll interval); while held, at the poll interval.
    takeovers = state === "retry" ? takeovers + 1 : 0;
    const pause = state === "retry" && takeovers <= 3 ? 100 : (options.pollMs ?? 1_000);
    await delay(pause, undefined, signal === undefined ? {} : { signal }).catch(() => undefined);
  }
  let beats = 0;
  const refresh = setInterval(() => void node.run(["sh", "-c", refreshScript, "sh", lock, me, String(++beats)]).catch(() => undefined), options.refreshMs ?? 20_000);
  let failed = false;
  try {
    return await work();
  } catch (error) {
    failed = true;
    throw error;
  } finally {
    clearInterval(refresh);
    // Work that failed (its node cut off, say) is not held up by the removal: a lock left behind
    // is this process's own, taken over by its next pass.
    const released = release(node, lock, me);
    giveBack(key, released);
    if (!failed) await released;
  }
}

/** Lock holdings and give-backs under way (a failed or stopped work does not wait for its release). */
const pendingReleases = new Set<Promise<void>>();

/**
 * Waits for the lock holdings and give-backs still under way (a stopped one ends at once, its
 * give-back once its last question has answered; all within `withinMs`, default 10 s): a process
 * about to close its connections to the nodes (`shardctl stage` stopped by a signal) gives its
 * locks back first, or the next staging from elsewhere waits out the stale bound (two minutes) for them.
 */
export async function settleLockReleases(withinMs = 10_000): Promise<void> {
  const deadline = performance.now() + withinMs;
  // Until none is left: a holding that ends starts its release then, after the first look.
  while (pendingReleases.size > 0 && performance.now() < deadline) {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([Promise.all([...pendingReleases]), new Promise((resolve) => (timer = setTimeout(resolve, deadline - performance.now())))]);
    clearTimeout(timer);
  }
}

/** Per node and lock directory: this process's give-back of that lock under way, forgotten once done. */
const givingBack = new Map<string, Promise<void>>();

/** The key of a lock directory on a node in `givingBack` (two nodes may hold the same path). */
function givingBackKey(node: NodeAccess, lock: string): string {
  return `${node.config.name}\0${lock}`;
}

/** Track `release` (it never rejects) as the give-back of `key`, after any before it. */
function giveBack(key: string, release: Promise<void>): void {
  const before = givingBack.get(key);
  const given = before === undefined ? release : Promise.all([before, release]).then(() => undefined);
  givingBack.set(key, given);
  pendingReleases.add(given);
  void given.finally(() => {
    pendingReleases.delete(given);
    if (givingBack.get(key) === given) givingBack.delete(key);
  });
}

/** Whether a lock's taking answered that it made no lock: it found one held, or moved a stale one aside. */
function madeNoLock(answer: CommandResult): boolean {
  return answer.exitCode === 0 && /^(held|retry)\n/.test(answer.stdout);
}

/** `work`'s result, or undefined as soon as `signal` aborts (`work` goes on; its failure is then the caller's to handle). */
function untilStopped<T>(work: Promise<T>, signal: AbortSignal | undefined): Promise<T | undefined> {
  return signal === undefined ? work : untilAborted<T | undefined>(work, signal, () => undefined);
}

/**
 * Remove `lock` while it names `me`. A node that does not answer within 5 s keeps it (taken over by
 * this process's next pass, or by another once stale): a loaded node can take a few seconds to start
 * a command's shell.
 */
async function release(node: NodeAccess, lock: string, me: string): Promise<void> {
  await node.run(["sh", "-c", releaseScript, "sh", lock, me], { deadlineMs: 5_000 }).catch(() => undefined);
}

function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true;
}

function cancelled(node: NodeAccess, file: string, signal: AbortSignal): ShardctlError {
  const why = signal.reason instanceof Error ? signal.reason.message : "its caller stopped it";
  return new ShardctlError("StagingCancelled", `node ${node.config.name}: staging stopped while it took the node's lock of ${file}: ${why}`);
}
