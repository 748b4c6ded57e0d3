/** One daemon per watched directory, keyed by the directory itself (not by settings or state dir). */
import { spawn } from "node:child_process";
import { mkdir, mkdtemp, readdir, readFile, rm, stat, symlink, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { acquireDaemonLock, describeSilence, findDaemon } from "../../src/reconciler/daemon-lock.js";
import { isShardctlError } from "../../src/errors/index.js";

let root: string;
let locks: string;
let watched: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-lock-"));
  locks = join(root, "locks");
  watched = join(root, "clusters");
  await mkdir(watched);
});

afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

test("a second daemon on the same directory — even through a symlink — is refused, naming the first one's pid", async () => {
  const first = await acquireDaemonLock(watched, locks);
  await symlink(watched, join(root, "alias"));
  for (const dir of [watched, join(root, "alias")]) {
    const error = await acquireDaemonLock(dir, locks).catch((e: unknown) => e);
    expect(isShardctlError(error, "DaemonAlreadyRunning")).toBe(true);
    expect((error as Error).message).toContain(`pid ${process.pid}`);
  }
  await first.release();
  const again = await acquireDaemonLock(watched, locks);
  await again.release();
  expect(await readdir(locks)).toEqual([]);
});

test("a lock left by a killed daemon, or naming a pid now used by another process, is taken over", async () => {
  // A process that has exited: its pid is free.
  const child = spawn(process.execPath, ["-e", ""]);
  const deadPid = await new Promise<number>((resolve) => child.once("exit", () => resolve(child.pid!)));
  const file = await lockFileOf();
  await writeFile(file, `${deadPid}\n123\n${watched}\n`);
  const taken = await acquireDaemonLock(watched, locks);
  await taken.release();
  // This very process, but with another start time: the pid was recycled.
  await writeFile(file, `${process.pid}\n1\n${watched}\n`);
  const retaken = await acquireDaemonLock(watched, locks);
  await retaken.release();
});

/** The lock file path for `watched`, learnt by taking and releasing the lock once. */
async function lockFileOf(): Promise<string> {
  const lock = await acquireDaemonLock(watched, locks);
  await lock.release();
  return lock.file;
}

test("a running owner whose lock has not been touched for four heartbeats is silent; a lock without a heartbeat never is", async () => {
  const lock = await acquireDaemonLock(watched, locks, 10_000);
  try {
    const fresh = await findDaemon(watched, locks);
    expect(fresh).toMatchObject({ pid: process.pid, silent: false });
    // 41 s without a beat at 10 s intervals: more than four missed.
    const then = new Date(Date.now() - 41_000);
    await utimes(lock.file, then, then);
    const quiet = await findDaemon(watched, locks);
    expect(quiet?.silent).toBe(true);
    expect(quiet!.silentMs).toBeGreaterThanOrEqual(41_000);
    expect(describeSilence(quiet!)).toMatch(/^pid \d+, not heard from for 4[1-9] s: stopped or hung\?$/);
    // 39 s: not yet.
    const recent = new Date(Date.now() - 39_000);
    await utimes(lock.file, recent, recent);
    expect((await findDaemon(watched, locks))?.silent).toBe(false);
    // A lock written before heartbeats (three lines) tells nothing about silence.
    await writeFile(lock.file, `${process.pid}\n${(await readFile(lock.file, "utf8")).split("\n")[1]}\n${watched}\n`);
    await utimes(lock.file, then, then);
    expect((await findDaemon(watched, locks))?.silent).toBe(false);
  } finally {
    await lock.release();
  }
  expect(await findDaemon(watched, locks)).toBeUndefined();
});

test("the owner touches its lock every heartbeat", async () => {
  const lock = await acquireDaemonLock(watched, locks, 100);
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
  const lock = await acquireDaemonLock(watched, locks, 3_600_000);
  try {
    const [pid, startTime, dir] = (await readFile(lock.file, "utf8")).split("\n");
    await writeFile(lock.file, `${pid}\n${startTime}\n${dir}\n100\n`);
    const at = (ms: number): Date => new Date(Date.now() - ms);
    await utimes(lock.file, at(2_000), at(2_000));
    expect((await findDaemon(watched, locks))?.silent).toBe(false);
    await utimes(lock.file, at(3_500), at(3_500));
    expect((await findDaemon(watched, locks))?.silent).toBe(true);
  } finally {
    await lock.release();
  }
});

test("a lock directory that cannot be made (a read-only home) is DaemonLockFailed naming it and XDG_CACHE_HOME, not a bare EACCES", async () => {
  // Under a file, which even root cannot make a directory in.
  const blocked = join(root, "not-a-directory");
  await writeFile(blocked, "");
  const error = await acquireDaemonLock(watched, join(blocked, "shardctl", "daemons")).catch((e: unknown) => e);
  expect(isShardctlError(error, "DaemonLockFailed")).toBe(true);
  expect((error as Error).message).toContain(`cannot create ${join(blocked, "shardctl", "daemons")}, where the daemon keeps the lock`);
  expect((error as Error).message).toContain("set XDG_CACHE_HOME to a directory you can write");
});
