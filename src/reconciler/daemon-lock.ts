/**
 * One daemon per watched directory, whatever settings file, state directory or user each was
 * started with: the lock is a file in the directory itself (`.shardctl-daemon.lock`), where the
 * daemon writes its status files too, so every daemon and every reader (`status`, `wait`,
 * `reconcile`, run by anyone who can read the directory) finds the same one. It is created
 * exclusively and holds the owner's pid and kernel start time; a lock whose owner no longer runs
 * (killed, or its pid now names another process) is stale and is taken over — by rename, so two
 * daemons starting at once cannot both take it.
 *
 * While it runs, the daemon touches the lock every `heartbeatMs` (its modification time is the
 * heartbeat; the interval is the lock's fourth line, its start time in ms the fifth, its state
 * directory the sixth), and writes it again if it is gone (a checkout
 * that removed and recreated the directory, a `git clean`). A daemon stopped (SIGSTOP, a frozen VM)
 * or hung in its event loop keeps its pid but stops touching it: after `missedBeats` intervals of
 * silence (and at least `minSilenceMs`) readers call it silent, because the status files it wrote
 * no longer follow what runs.
 */
import { createHash, randomBytes } from "node:crypto";
import { chmod, link, readFile, realpath, rename, rm, stat, utimes, writeFile } from "node:fs/promises";
import { homedir } from "node:os";
import { join } from "node:path";
import { ShardctlError } from "../errors/index.js";
import { lookAtProcess } from "../local-processes/index.js";

export interface DaemonLock {
  file: string;
  release(): Promise<void>;
}

interface Owner {
  pid: number;
  /** Kernel start time of the owner (Linux); empty where it cannot be read. */
  startTime: string;
  /** The owner's heartbeat interval, ms; undefined in a lock that predates heartbeats. */
  heartbeatMs?: number;
  /** When the owner started, ms since the epoch (its clock); undefined in a lock that predates it. */
  startedAtMs?: number;
  /** The state directory the owner runs with (its requests are taken there); undefined in a lock that predates it. */
  stateDir?: string;
}

/** Default heartbeat interval of a daemon, ms. */
export const defaultHeartbeatMs = 5000;
/** Intervals without a heartbeat after which a running daemon is silent (stopped or hung). */
export const missedBeats = 4;
/**
 * Least silence that counts, ms: a short heartbeat must not turn a garbage-collection pause, a busy
 * thread pool or a file system that keeps modification times to the second into "silent".
 */
export const minSilenceMs = 3000;

/** How long a daemon beating every `heartbeatMs` may go unheard before it is silent, ms. */
export function silenceAfterMs(heartbeatMs: number): number {
  return Math.max(missedBeats * heartbeatMs, minSilenceMs);
}

/** The daemon that holds a directory's lock, as readers see it. */
export interface DaemonSighting {
  pid: number;
  /** Time since its last heartbeat, ms. */
  silentMs: number;
  /** Missed `missedBeats` heartbeats (see silenceAfterMs): its process exists but does not run its event loop. */
  silent: boolean;
  /**
   * When it started, ms since the epoch: a status file last written before then is the word of a
   * daemon that no longer runs, until this one's first pass of the cluster writes (or touches) it.
   * Undefined for a lock written by a version that did not say.
   */
  startedAtMs?: number;
  /** The state directory it runs with, where it takes reconcile requests (the settings file may say another since). */
  stateDir?: string;
  /** The user it runs as: the lock's owner (root may write into the space a file system keeps back). */
  uid?: number;
}

/** The lock's name in the watched directory (a hidden file: never taken for a definition). */
export const daemonLockName = ".shardctl-daemon.lock";

/** The pid of the daemon watching `watchedDir`, if one runs (answering or silent). */
export async function daemonWatching(watchedDir: string): Promise<number | undefined> {
  return (await findDaemon(watchedDir))?.pid;
}

/**
 * The daemon watching `watchedDir` and how long it has been silent, if one runs: the lock's owner,
 * or else a daemon of an earlier shardctl version that kept its lock in the user's cache directory
 * (see earlierVersionLock): it runs on through an upgrade until it is restarted, and `status`,
 * `wait` and `reconcile` of the new version must still find it.
 */
export async function findDaemon(watchedDir: string): Promise<DaemonSighting | undefined> {
  const own = await lockFileFor(watchedDir);
  // The earlier versions' place only when none holds this one.
  const [file, owner] = (await runningOwner(own)) ?? (await runningOwner(await earlierVersionLock(watchedDir))) ?? [own, undefined];
  if (owner === undefined) return undefined;
  const lock = await stat(file).catch(() => undefined);
  const touched = lock?.mtimeMs;
  const silentMs = touched === undefined ? 0 : Math.max(0, Date.now() - touched);
  return {
    pid: owner.pid,
    silentMs,
    silent: owner.heartbeatMs !== undefined && silentMs > silenceAfterMs(owner.heartbeatMs),
    ...(owner.startedAtMs === undefined ? {} : { startedAtMs: owner.startedAtMs }),
    ...(owner.stateDir === undefined ? {} : { stateDir: owner.stateDir }),
    ...(lock === undefined ? {} : { uid: lock.uid }),
  };
}

/**
 * "pid N, not heard from for 42 s: stopped or hung, or is its folder read-only?": how a silent daemon
 * is named to a person. A daemon that runs but cannot touch its lock (the folder remounted
 * read-only) looks the same from here, and writes no status file there either.
 */
export function describeSilence(daemon: DaemonSighting): string {
  return `pid ${daemon.pid}, not heard from for ${Math.round(daemon.silentMs / 1000)} s: stopped or hung, or is its folder read-only?`;
}

async function lockFileFor(watchedDir: string): Promise<string> {
  return join(await realpath(watchedDir).catch(() => watchedDir), daemonLockName);
}

/**
 * The lock at `file` and its owner, when that owner runs (a live pid taken at its word where start
 * times cannot be read: see isRunning). A lock this user cannot read names no one it can tell.
 */
async function runningOwner(file: string): Promise<[string, Owner] | undefined> {
  const owner = await readOwner(file).catch(() => undefined);
  return owner !== undefined && (await isRunning(owner)) ? [file, owner] : undefined;
}

/**
 * Where shardctl versions before the lock moved into the watched directory kept a directory's
 * lock: `$XDG_CACHE_HOME/shardctl/daemons` (default `~/.cache/shardctl/daemons`), named by the first
 * 16 hex digits of the sha256 of the directory's real path. Its first four lines are as today's.
 * Only read: a daemon of such a version that still runs is found, and a new one refuses to start
 * beside it (both would act on every cluster).
 */
async function earlierVersionLock(watchedDir: string, env: NodeJS.ProcessEnv = process.env): Promise<string> {
  const real = await realpath(watchedDir).catch(() => watchedDir);
  const dir = join(env.XDG_CACHE_HOME ?? join(homedir(), ".cache"), "shardctl", "daemons");
  return join(dir, `${createHash("sha256").update(real).digest("hex").slice(0, 16)}.lock`);
}

/** Take the lock of `watchedDir` and touch it every `heartbeatMs` until released. */
export async function acquireDaemonLock(
  watchedDir: string,
  heartbeatMs = defaultHeartbeatMs,
  onLost: (otherPid: number) => void = () => undefined,
  stateDir?: string,
  /** Told when the heartbeat cannot be written (the system's words), and with undefined when it can again. */
  onBeatFailure: (failure: string | undefined) => void = () => undefined,
): Promise<DaemonLock> {
  const real = await realpath(watchedDir).catch(() => watchedDir);
  const file = await lockFileFor(watchedDir);
  const earlier = await runningOwner(await earlierVersionLock(watchedDir));
  if (earlier !== undefined) {
    const [lock, owner] = earlier;
    throw new ShardctlError(
      "DaemonAlreadyRunning",
      `a shardctl daemon of an earlier version (pid ${owner.pid}, its lock ${lock}) already watches ${real}; stop it first (kill ${owner.pid}: its clusters keep running, and this daemon adopts them), then start this one`,
      { terminal: true },
    );
  }
  const me: Owner = {
    pid: process.pid,
    startTime: (await lookAtProcess(process.pid)).startTime,
    heartbeatMs,
    startedAtMs: Date.now(),
    ...(stateDir === undefined ? {} : { stateDir }),
  };
  for (let attempt = 0; attempt < 5; attempt++) {
    try {
      await writeLock(file, me, real);
      return holdLock(file, me, real, heartbeatMs, onLost, onBeatFailure);
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      if (code !== "EEXIST") {
        const fix =
          code === "EROFS"
            ? "its file system is mounted read-only: mount it read-write, or watch a directory on one that is (the daemon writes the status files there too)"
            : "run the daemon as a user who can write that directory (it writes the status files there too)";
        throw new ShardctlError("DaemonLockFailed", `cannot create ${file}, the lock that stops a second daemon watching ${real} (${(error as Error).message}): ${fix}`, {
          cause: error,
        });
      }
    }
    const owner = await readOwner(file).catch(async (error: unknown) => {
      const info = await stat(file).catch(() => undefined);
      const whose = info === undefined ? "" : ` (its owner uid ${info.uid}, mode ${(info.mode & 0o777).toString(8).padStart(4, "0")})`;
      throw new ShardctlError(
        "DaemonLockFailed",
        `cannot read ${file}, the lock of the daemon that may watch ${real}${whose}: ${(error as Error).message}; a daemon of another user may hold it, and is not taken over: run this daemon as that user, or remove the lock once no daemon watches the directory`,
        { terminal: true, cause: error },
      );
    });
    if (owner !== undefined && (await isRunning(owner, file))) {
      throw new ShardctlError(
        "DaemonAlreadyRunning",
        `another shardctl daemon (pid ${owner.pid}) already watches ${real}; stop it first (kill ${owner.pid}) or watch another directory`,
        { terminal: true },
      );
    }
    // Stale. Move it aside atomically: of two daemons doing this at once only one moves the stale
    // lock; the other moves nothing (ENOENT) or a fresh lock it must put back.
    const aside = `${file}.${process.pid}.stale`;
    const moved = await rename(file, aside).then(
      () => true,
      () => false,
    );
    if (moved) {
      const movedOwner = await readOwner(aside);
      if (movedOwner !== undefined && owner !== undefined && movedOwner.pid !== owner.pid) {
        // Someone took it over between our read and our rename: give it back.
        await rename(aside, file).catch(() => undefined);
      } else {
        await rm(aside, { force: true });
      }
    }
  }
  throw new ShardctlError("DaemonLockFailed", `could not take the daemon lock ${file} for ${real}`);
}

/**
 * Create the lock file of `me`, exclusively (EEXIST when one is there) and whole: written under a
 * name of its own, then linked to the lock's name, so no reader ever finds it empty (an empty lock
 * reads as stale, and another daemon would take it over).
 */
async function writeLock(file: string, me: Owner, real: string): Promise<void> {
  const text = `${me.pid}\n${me.startTime}\n${real}\n${me.heartbeatMs ?? ""}\n${me.startedAtMs ?? ""}\n${me.stateDir ?? ""}\n`;
  // A name nobody can guess, created exclusively: a link planted at a fixed name in the definitions
  // folder (others may write a shared checkout) would lead this write to any file.
  const draft = `${file}.${me.pid}.${randomBytes(6).toString("hex")}.new`;
  await writeFile(draft, text, { flag: "wx" });
  try {
    // Readable by every user whatever this process's umask: status, wait and a second daemon of
    // another user read it (one that could not would not know this daemon runs).
    await chmod(draft, 0o644);
    await link(draft, file);
  } catch (error) {
    // A file system without hard links (some network and FUSE mounts): created exclusively in place.
    if (!["EPERM", "ENOTSUP", "EOPNOTSUPP", "ENOSYS"].includes((error as NodeJS.ErrnoException).code ?? "")) throw error;
    await writeFile(file, text, { flag: "wx" });
    await chmod(file, 0o644);
  } finally {
    await rm(draft, { force: true });
  }
}

/**
 * The taken lock: touched every heartbeat (a timer that keeps no process alive) until released.
 * Each beat first reads whose it is. One found gone is written again, exclusively; one a stale
 * owner holds (a daemon killed after it took a lock found gone) is taken back. One another running
 * daemon holds was taken while this one's was gone (a `git clean` removes it, and a daemon started
 * then finds none): two daemons would each act on every cluster, so `onLost` hears the other's pid,
 * once, and this daemon must stop.
 */
function holdLock(
  file: string,
  me: Owner,
  real: string,
  heartbeatMs: number,
  onLost: (otherPid: number) => void,
  onBeatFailure: (failure: string | undefined) => void,
): DaemonLock {
  let released = false;
  let lost = false;
  // The beat under way, if any: release waits for it, so a lock it is writing again is not left behind.
  let beating: Promise<void> = Promise.resolve();
  const isMe = (owner: Owner | undefined): boolean => owner?.pid === me.pid && owner.startTime === me.startTime;
  const keep = async (): Promise<void> => {
    let owner = await readOwner(file);
    if (owner !== undefined && !isMe(owner) && !(await isRunning(owner, file))) {
      await rm(file, { force: true });
      owner = undefined;
    }
    if (owner === undefined && !released) {
      // EEXIST: another daemon wrote it first; it is read again below.
      await writeLock(file, me, real).catch(() => undefined);
      owner = await readOwner(file);
    }
    if (owner !== undefined && !isMe(owner) && !released) {
      if (!lost && (await isRunning(owner, file))) {
        lost = true;
        onLost(owner.pid);
      }
      return;
    }
    const now = new Date();
    // A beat that cannot be written (a read-only or full file system) makes this daemon look silent
    // to status, wait and reconcile: said once as it starts failing, and once it beats again.
    const failure = await utimes(file, now, now).then(
      () => undefined,
      (error: unknown) => (error instanceof Error ? error.message : String(error)),
    );
    if ((failure === undefined) !== (beatFailure === undefined)) onBeatFailure(failure);
    beatFailure = failure;
  };
  let beatFailure: string | undefined;
  const beat = setInterval(() => {
    if (lost) return;
    beating = keep().catch(() => undefined);
  }, heartbeatMs);
  beat.unref();
  return {
    file,
    release: async () => {
      released = true;
      clearInterval(beat);
      await beating;
      await releaseIfOurs(file, me);
    },
  };
}

/**
 * The owner a lock file names; undefined when there is no file, or it names no pid. A file that is
 * there but cannot be read (another user's, mode 0600) is thrown, never taken for no owner: that
 * daemon may well run, and taking its lock would have two daemons act on every cluster.
 */
async function readOwner(file: string): Promise<Owner | undefined> {
  const text = await readFile(file, "utf8").catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return "";
    throw error;
  });
  const [pidLine, startTime = "", , heartbeatLine = "", startedLine = "", stateDir = ""] = text.split("\n");
  const pid = Number(pidLine);
  if (!Number.isInteger(pid) || pid <= 0) return undefined;
  const heartbeatMs = Number(heartbeatLine);
  const startedAtMs = Number(startedLine);
  return {
    pid,
    startTime,
    ...(heartbeatLine !== "" && Number.isFinite(heartbeatMs) && heartbeatMs > 0 ? { heartbeatMs } : {}),
    ...(startedLine !== "" && Number.isFinite(startedAtMs) && startedAtMs > 0 ? { startedAtMs } : {}),
    ...(stateDir !== "" ? { stateDir } : {}),
  };
}

/**
 * Alive and the same process: a pid recycled by another program after a reboot is not the owner.
 * Where the system tells a process's start time (Linux), a daemon always records its own, so a
 * lock without one was never a daemon's here (a file committed or written by hand: `1` would name
 * init, alive for ever). Where it does not (macOS), a live pid is taken at its word while the lock
 * is touched: one silent for `staleBeats` heartbeats is not a daemon's that runs.
 */
async function isRunning(owner: Owner, file?: string): Promise<boolean> {
  const seen = await lookAtProcess(owner.pid);
  if (!seen.runs) return false;
  if (seen.startTime !== "") return seen.startTime === owner.startTime;
  if (file === undefined) return true;
  const touched = (await stat(file).catch(() => undefined))?.mtimeMs;
  return touched === undefined || Date.now() - touched < staleBeats * (owner.heartbeatMs ?? defaultHeartbeatMs);
}

/** Heartbeats a lock whose owner cannot be checked by its start time may miss before it counts as stale. */
const staleBeats = 6;

async function releaseIfOurs(file: string, me: Owner): Promise<void> {
  const owner = await readOwner(file).catch(() => undefined);
  if (owner?.pid === me.pid && owner.startTime === me.startTime) await rm(file, { force: true });
}
