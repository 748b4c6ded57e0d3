/**
 * One daemon per watched directory, whatever its settings, state directory, user or cache
 * directory: the lock is a file in the watched directory itself. A daemon of an earlier version,
 * which kept its lock in the user's cache directory, is still found.
 */
import { execFile, spawn } from "node:child_process";
import { createHash } from "node:crypto";
import { chmod, mkdir, mkdtemp, readdir, readFile, realpath, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { promisify } from "node:util";
import { acquireDaemonLock, describeSilence, findDaemon } from "../../src/reconciler/daemon-lock.js";
import { isShardctlError } from "../../src/errors/index.js";
import { requireBuild } from "../cli/support/run-shardctl.js";

const run = promisify(execFile);
let root: string;
let watched: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-lock-"));
  watched = join(root, "clusters");
  await mkdir(watched);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

test("a second daemon on the same directory — even through a symlink — is refused, naming the first one's pid", async () => {
  const first = await acquireDaemonLock(watched);
  expect(first.file).toBe(join(watched, ".shardctl-daemon.lock"));
  await symlink(watched, join(root, "alias"));
  // Another cache directory (another user's, or XDG_CACHE_HOME set) changes nothing.
  const cache = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = join(root, "other-cache");
  try {
    for (const dir of [watched, join(root, "alias")]) {
      const error = await acquireDaemonLock(dir).catch((e: unknown) => e);
      expect(isShardctlError(error, "DaemonAlreadyRunning")).toBe(true);
      expect((error as Error).message).toContain(`pid ${process.pid}`);
    }
  } finally {
    if (cache === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = cache;
  }
  await first.release();
  const again = await acquireDaemonLock(watched);
  await again.release();
  expect(await readdir(watched)).toEqual([]);
});

test("another user who can read the directory sees the daemon that holds it", async () => {
  requireBuild();
  const lock = await acquireDaemonLock(watched);
  try {
    // nobody (uid 65534) reads the lock through the built module, as `shardctl status` would.
    await chmod(root, 0o755);
    const module = new URL("../../dist/src/reconciler/daemon-lock.js", import.meta.url).pathname;
    const script = `import(${JSON.stringify(module)}).then(async (m) => console.log(JSON.stringify(await m.findDaemon(${JSON.stringify(watched)}))))`;
    const { stdout } = await run(process.execPath, ["-e", script], { uid: 65534, gid: 65534 });
    expect(JSON.parse(stdout)).toMatchObject({ pid: process.pid, silent: false });
  } finally {
    await lock.release();
  }
});

test("a lock is readable by all whatever the umask; one another user cannot read is never taken over (DaemonLockFailed naming it)", async () => {
  requireBuild();
  const old = process.umask(0o077);
  let lock: Awaited<ReturnType<typeof acquireDaemonLock>>;
  try {
    lock = await acquireDaemonLock(watched);
  } finally {
    process.umask(old);
  }
  try {
    expect((await stat(lock.file)).mode & 0o777).toBe(0o644);
    // As a lock an earlier version wrote under umask 077: a second daemon of another user, in a
    // directory that user may write (a shared checkout), must not take it for a stale one.
    await chmod(lock.file, 0o600);
    await chmod(root, 0o755);
    await chmod(watched, 0o777);
    const module = new URL("../../dist/src/reconciler/daemon-lock.js", import.meta.url).pathname;
    const script = `import(${JSON.stringify(module)}).then((m) => m.acquireDaemonLock(${JSON.stringify(watched)})).then(() => console.log("taken"), (e) => console.log(JSON.stringify({ reason: e.reason, message: e.message })))`;
    const { stdout } = await run(process.execPath, ["-e", script], { uid: 65534, gid: 65534 });
    const refusal = JSON.parse(stdout) as { reason: string; message: string };
    expect(refusal.reason).toBe("DaemonLockFailed");
    expect(refusal.message).toContain(`cannot read ${lock.file}, the lock of the daemon that may watch ${watched} (its owner uid 0, mode 0600)`);
    expect(refusal.message).toContain("a daemon of another user may hold it, and is not taken over");
    // Still this daemon's lock, and nothing left beside it.
    expect((await stat(lock.file)).uid).toBe(0);
    expect((await readdir(watched)).sort()).toEqual([".shardctl-daemon.lock"]);
  } finally {
    await chmod(watched, 0o755);
    await lock.release();
  }
});

test("a lock left by a killed daemon, or naming a pid now used by another process, is taken over", async () => {
  // A process that has exited: its pid is free.
  const child = spawn(process.execPath, ["-e", ""]);
  const deadPid = await new Promise<number>((resolve) => child.once("exit", () => resolve(child.pid!)));
  const file = await lockFileOf();
  await writeFile(file, `${deadPid}\n123\n${watched}\n`);
  const taken = await acquireDaemonLock(watched);
  await taken.release();
  // This very process, but with another start time: the pid was recycled.
  await writeFile(file, `${process.pid}\n1\n${watched}\n`);
  const retaken = await acquireDaemonLock(watched);
  await retaken.release();
});

test("a lock whose daemon was killed but not yet reaped (a zombie: its parent waits late, or never) is taken over, and no reader sees it run", async () => {
  // `sleep 0.1`'s parent becomes `sleep 30`, which never waits for it: it stays a zombie.
  const parent = spawn("sh", ["-c", "sleep 0.1 & echo $!; exec sleep 30"], { stdio: ["ignore", "pipe", "ignore"] });
  try {
    const zombie = Number(await new Promise<string>((resolve) => parent.stdout.once("data", (d: Buffer) => resolve(d.toString().trim()))));
    let stat = "";
    for (let i = 0; i < 100 && !/\) Z /.test(stat); i++) {
      await new Promise((r) => setTimeout(r, 20));
      stat = await readFile(`/proc/${zombie}/stat`, "utf8");
    }
    expect(stat).toMatch(/\) Z /);
    const startTime = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    const file = await lockFileOf();
    await writeFile(file, `${zombie}\n${startTime}\n${watched}\n5000\n`);
    expect(await findDaemon(watched)).toBeUndefined();
    const taken = await acquireDaemonLock(watched);
    await taken.release();
  } finally {
    parent.kill("SIGKILL");
  }
});

/** The lock file path for `watched`, learnt by taking and releasing the lock once. */
async function lockFileOf(): Promise<string> {
  const lock = await acquireDaemonLock(watched);
  await lock.release();
  return lock.file;
}

test("a running owner whose lock has not been touched for four heartbeats is silent; a lock without a heartbeat never is", async () => {
  const lock = await acquireDaemonLock(watched, 10_000);
  try {
    const fresh = await findDaemon(watched);
    expect(fresh).toMatchObject({ pid: process.pid, silent: false });
    // 41 s without a beat at 10 s intervals: more than four missed.
    const then = new Date(Date.now() - 41_000);
    await utimes(lock.file, then, then);
    const quiet = await findDaemon(watched);
    expect(quiet?.silent).toBe(true);
    expect(quiet!.silentMs).toBeGreaterThanOrEqual(41_000);
    expect(describeSilence(quiet!)).toMatch(/^pid \d+, not heard from for 4[1-9] s: stopped or hung, or is its folder read-only\?$/);
    // 39 s: not yet.
    const recent = new Date(Date.now() - 39_000);
    await utimes(lock.file, recent, recent);
    expect((await findDaemon(watched))?.silent).toBe(false);
    // A lock written before heartbeats (three lines) tells nothing about silence.
    await writeFile(lock.file, `${process.pid}\n${(await readFile(lock.file, "utf8")).split("\n")[1]}\n${watched}\n`);
    await utimes(lock.file, then, then);
    expect((await findDaemon(watched))?.silent).toBe(false);
  } finally {
    await lock.release();
  }
  expect(await findDaemon(watched)).toBeUndefined();
});

test("the owner touches its lock every heartbeat", async () => {
  const lock = await acquireDaemonLock(watched, 100);
  try {
    const then = new Date(Date.now() - 60_000);
    await utimes(lock.file, then, then);
    await new Promise((r) => setTimeout(r, 400));
    expect((await stat(lock.file)).mtimeMs).toBeGreaterThan(Date.now() - 5_000);
  } finally {
    await lock.release();
  }
});

test("a short heartbeat still needs 3 s of silence: a pause of a second or two is not a silent daemon", async () => {
  // Taken with a beat that never comes during the test, then the lock says 100 ms.
  const lock = await acquireDaemonLock(watched, 3_600_000);
  try {
    const [pid, startTime, dir] = (await readFile(lock.file, "utf8")).split("\n");
    await writeFile(lock.file, `${pid}\n${startTime}\n${dir}\n100\n`);
    const at = (ms: number): Date => new Date(Date.now() - ms);
    await utimes(lock.file, at(2_000), at(2_000));
    expect((await findDaemon(watched))?.silent).toBe(false);
    await utimes(lock.file, at(3_500), at(3_500));
    expect((await findDaemon(watched))?.silent).toBe(true);
  } finally {
    await lock.release();
  }
});

test("a lock removed while the daemon runs (a checkout that recreated the directory, a git clean) is written again at its next beat", async () => {
  const lock = await acquireDaemonLock(watched, 100);
  try {
    await rm(lock.file);
    await new Promise((r) => setTimeout(r, 400));
    expect((await findDaemon(watched))?.pid).toBe(process.pid);
  } finally {
    await lock.release();
  }
  expect(await findDaemon(watched)).toBeUndefined();
});

test("a lock taken by another daemon while this one's was gone (started in the gap a git clean leaves): this one hears it lost, once, and leaves the other's lock alone", async () => {
  requireBuild();
  const heard: number[] = [];
  // A beat a second apart: the other daemon takes the lock well within the gap.
  const lock = await acquireDaemonLock(watched, 1_000, (pid) => heard.push(pid));
  // The other daemon: a real process that takes the lock, as `shardctl daemon` does, once told to
  // (its start-up, slower than a beat on a busy machine, is over by then).
  const module = new URL("../../dist/src/reconciler/daemon-lock.js", import.meta.url).pathname;
  const script = `import(${JSON.stringify(module)}).then((m) => { console.log("loaded"); process.stdin.once("data", async () => { await m.acquireDaemonLock(${JSON.stringify(watched)}, 3600000); console.log("taken"); }); setInterval(() => {}, 1000); })`;
  const other = spawn(process.execPath, ["-e", script], { stdio: ["pipe", "pipe", "inherit"] });
  const said = (word: string): Promise<void> =>
    new Promise<void>((resolve, reject) => {
      const listen = (chunk: Buffer): void => {
        if (!chunk.toString().includes(word)) return;
        other.stdout!.off("data", listen);
        resolve();
      };
      other.stdout!.on("data", listen);
      other.once("exit", (code) => reject(new Error(`the other daemon exited ${code}`)));
    });
  try {
    await said("loaded");
    await rm(lock.file);
    const taken = said("taken");
    other.stdin!.write("go\n");
    await taken;
    const deadline = Date.now() + 5_000;
    while (heard.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 1_200));
    expect(heard).toEqual([other.pid]);
    expect((await findDaemon(watched))?.pid).toBe(other.pid);
    // Released, this daemon removes nothing of the other's.
    await lock.release();
    expect((await findDaemon(watched))?.pid).toBe(other.pid);
  } finally {
    await lock.release();
    other.kill("SIGKILL");
    await new Promise((resolve) => (other.exitCode === null ? other.once("exit", resolve) : resolve(undefined)));
    await rm(lock.file, { force: true });
  }
});

test("a lock its owner lost to a daemon that then died is taken back at the next beat", async () => {
  const heard: number[] = [];
  const lock = await acquireDaemonLock(watched, 100, (pid) => heard.push(pid));
  try {
    const child = spawn(process.execPath, ["-e", ""]);
    const deadPid = await new Promise<number>((resolve) => child.once("exit", () => resolve(child.pid!)));
    await writeFile(lock.file, `${deadPid}\n123\n${watched}\n100\n`);
    await new Promise((r) => setTimeout(r, 400));
    expect((await findDaemon(watched))?.pid).toBe(process.pid);
    expect(heard).toEqual([]);
  } finally {
    await lock.release();
  }
  expect(await findDaemon(watched)).toBeUndefined();
});

test("a lock written by hand (a commit, a sync) naming a live pid without its start time is no daemon's: taken at a start, taken back at a beat, never heard as lost", async () => {
  const file = await lockFileOf();
  // pid 1 (init) is alive for ever; a daemon on this machine always records its start time.
  await writeFile(file, "1\n\n/x\n");
  expect(await findDaemon(watched)).toBeUndefined();
  const taken = await acquireDaemonLock(watched);
  await taken.release();
  const heard: number[] = [];
  const lock = await acquireDaemonLock(watched, 100, (pid) => heard.push(pid));
  try {
    await writeFile(lock.file, "1\n\n/x\n");
    await new Promise((r) => setTimeout(r, 400));
    expect((await findDaemon(watched))?.pid).toBe(process.pid);
    expect(heard).toEqual([]);
  } finally {
    await lock.release();
  }
});

test("a directory the daemon cannot write (a read-only file system) is DaemonLockFailed naming the lock and the fix, not a bare EROFS", async () => {
  if (process.getuid?.() !== 0) throw new Error("this test mounts a read-only tmpfs: run it as root");
  const readOnly = join(root, "read-only");
  await mkdir(readOnly);
  await run("mount", ["-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", readOnly]);
  try {
    const error = await acquireDaemonLock(readOnly).catch((e: unknown) => e);
    expect(isShardctlError(error, "DaemonLockFailed")).toBe(true);
    expect((error as Error).message).toContain(`cannot create ${join(readOnly, ".shardctl-daemon.lock")}, the lock that stops a second daemon watching ${readOnly}`);
    expect((error as Error).message).toContain("its file system is mounted read-only: mount it read-write, or watch a directory on one that is");
  } finally {
    await run("umount", [readOnly]);
  }
});

test("a heartbeat that cannot be written (the folder remounted read-only) is said once, and once again when it is written again", async () => {
  if (process.getuid?.() !== 0) throw new Error("this test remounts a tmpfs read-only: run it as root");
  const folder = join(root, "goes-read-only");
  await mkdir(folder);
  await run("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", folder]);
  const said: Array<string | undefined> = [];
  const lock = await acquireDaemonLock(folder, 100, undefined, undefined, (failure) => said.push(failure));
  try {
    await run("mount", ["-o", "remount,ro", folder]);
    await new Promise((r) => setTimeout(r, 600));
    expect(said).toHaveLength(1);
    expect(said[0]).toMatch(/EROFS/);
    await run("mount", ["-o", "remount,rw", folder]);
    await new Promise((r) => setTimeout(r, 600));
    expect(said).toHaveLength(2);
    expect(said[1]).toBeUndefined();
  } finally {
    await lock.release();
    await run("umount", [folder]);
  }
});

test("a daemon of an earlier version, whose lock is in the user's cache directory, is found by readers and refuses a new daemon beside it until it is gone", async () => {
  // An earlier version's daemon: a live process, its lock where those versions kept it.
  const old = spawn("sleep", ["60"]);
  const cache = process.env.XDG_CACHE_HOME;
  process.env.XDG_CACHE_HOME = join(root, "earlier-cache");
  try {
    const stat = await readFile(`/proc/${old.pid}/stat`, "utf8");
    const startTime = stat.slice(stat.lastIndexOf(")") + 2).split(" ")[19];
    const dir = join(root, "earlier-cache", "shardctl", "daemons");
    await mkdir(dir, { recursive: true });
    const digest = createHash("sha256")
      .update(await realpath(watched))
      .digest("hex")
      .slice(0, 16);
    await writeFile(join(dir, `${digest}.lock`), `${old.pid}\n${startTime}\n${watched}\n5000\n`);
    expect(await findDaemon(watched)).toMatchObject({ pid: old.pid, silent: false });
    const error = await acquireDaemonLock(watched).catch((e: unknown) => e);
    expect(isShardctlError(error, "DaemonAlreadyRunning")).toBe(true);
    expect((error as Error).message).toContain(`a shardctl daemon of an earlier version (pid ${old.pid}, its lock ${join(dir, `${digest}.lock`)}) already watches`);
    // Stopped (as a restart onto the new version does): the new daemon starts.
    old.kill();
    await new Promise((resolve) => old.once("exit", resolve));
    expect(await findDaemon(watched)).toBeUndefined();
    const lock = await acquireDaemonLock(watched);
    expect(await findDaemon(watched)).toMatchObject({ pid: process.pid });
    await lock.release();
  } finally {
    old.kill();
    if (cache === undefined) delete process.env.XDG_CACHE_HOME;
    else process.env.XDG_CACHE_HOME = cache;
  }
});
