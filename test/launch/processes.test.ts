/**
 * Stopping processes a launch may have lost track of, for real on this machine: a process started
 * but never recorded (the daemon died in between), an engine whose wrapper was killed, and a
 * recycled process group that is not ours and must survive, a process that exits between the
 * stop's look at it and its signal, and what an engine started and left in its process group (a
 * helper that ignores SIGTERM, the children of an engine that crashed).
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm, utimes, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { describeExit, plannedProcess, startEngineProcess, stopEngineProcess } from "../../src/launch/processes.js";
import type { LedgerProcess } from "../../src/launch/ledger.js";
import { LocalNode, launchMark } from "../../src/nodes/index.js";

const run = promisify(execFile);
let root: string;
let node: LocalNode;
const strays: number[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-processes-"));
  node = new LocalNode({ name: "local", host: "local", modelDir: root });
});

afterAll(async () => {
  for (const pid of strays) await run("kill", ["-9", String(pid)]).catch(() => undefined);
  await rm(root, { recursive: true, force: true });
});

/** A long-running stand-in engine whose command line names its run directory, as real ones do. */
function engineArgv(runDir: string): string[] {
  return [process.execPath, "-e", "setInterval(() => {}, 1000)", "--", join(runDir, "cluster.toml")];
}

async function isAlive(pid: number): Promise<boolean> {
  const { stdout } = await run("ps", ["-o", "stat=", "-p", String(pid)]).catch(() => ({ stdout: "" }));
  return stdout.trim() !== "" && !stdout.trim().startsWith("Z");
}

/**
 * The engine the wrapper `pid` started: the member of its group running this Node.js. Not merely its
 * first child: a start returns once the wrapper's start time is known, which can be while it still
 * notes that time (a `$(cat …)` subshell is its child then) and before it has started the engine.
 */
async function engineOf(pid: number): Promise<number> {
  return memberOf(pid, process.execPath);
}

test("a process started but never recorded (pid 0 in the ledger) is found by its exit file and stopped", async () => {
  const planned = plannedProcess("stage", 0, "local", join(root, "unrecorded"));
  await node.mkdir(planned.runDir);
  // Started exactly as a launch starts it, then "the daemon dies" before writing the pid down.
  const started = await startEngineProcess(node, planned, engineArgv(planned.runDir));
  expect(await isAlive(started.pid)).toBe(true);
  expect(await stopEngineProcess(node, planned, 2_000)).toBe("terminated");
  expect(await isAlive(started.pid)).toBe(false);
  expect(await stopEngineProcess(node, planned, 2_000)).toBe("gone");
});

test("a stop that comes while the wrapper is still getting ready ends it there: the engine never starts", async () => {
  // The wrapper reads OOM counts with awk before it starts the engine: a slow awk holds it there.
  const slowBin = join(root, "slow-bin");
  await node.mkdir(slowBin);
  const awk = (await run("sh", ["-c", "command -v awk"])).stdout.trim();
  await writeFile(join(slowBin, "awk"), `#!/bin/sh\nsleep 1\nexec ${awk} "$@"\n`, { mode: 0o755 });
  const path = process.env.PATH;
  process.env.PATH = `${slowBin}:${path ?? ""}`;
  try {
    const planned = plannedProcess("stage", 3, "local", join(root, "getting-ready"));
    await node.mkdir(planned.runDir);
    const started = await startEngineProcess(node, planned, engineArgv(planned.runDir));
    expect(await stopEngineProcess(node, started, 2_000)).toBe("terminated");
  } finally {
    process.env.PATH = path;
  }
  // Nothing of it runs afterwards, the engine included.
  await new Promise((r) => setTimeout(r, 1_500));
  const { stdout } = await run("ps", ["-A", "-ww", "-o", "args="]);
  expect(stdout.split("\n").filter((line) => line.includes(join(root, "getting-ready")))).toEqual([]);
});

test("an engine whose wrapper was killed is stopped through the process group it was left in", async () => {
  const planned = plannedProcess("stage", 1, "local", join(root, "orphan"));
  await node.mkdir(planned.runDir);
  const started = await startEngineProcess(node, planned, engineArgv(planned.runDir));
  const engine = await engineOf(started.pid);
  await run("kill", ["-9", String(started.pid)]);
  // A SIGKILL lands a moment after kill(1) returns: on a loaded machine the stop below once found
  // the wrapper still there and stopped it as running ("terminated").
  for (let i = 0; i < 100 && (await isAlive(started.pid)); i++) await new Promise((r) => setTimeout(r, 20));
  expect(await isAlive(started.pid)).toBe(false);
  expect(await isAlive(engine)).toBe(true);
  expect(await stopEngineProcess(node, started, 2_000)).toBe("orphans-stopped");
  expect(await isAlive(engine)).toBe(false);
});

test("a recycled process group that is not ours is never signalled", async () => {
  // A leader that exits at once, leaving a member in its group: as a daemonising program does.
  const { stdout } = await run("setsid", ["sh", "-c", "sleep 300 >/dev/null 2>&1 & echo $$ $!; exit 0"]);
  const [group, member] = stdout.trim().split(/\s+/).map(Number) as [number, number];
  strays.push(member);
  expect(await isAlive(member)).toBe(true);
  // The ledger remembers a process of ours with that pid, long gone.
  const recorded = { ...plannedProcess("stage", 2, "local", join(root, "recycled")), pid: group, startTime: "linux:1" };
  expect(await stopEngineProcess(node, recorded, 1_000)).toBe("gone");
  expect(await isAlive(member)).toBe(true);
});

/** A node on which the process exits between the stop's look at it and its signal (as a dying engine may). */
class ExitsBeforeSignalNode extends LocalNode {
  constructor(private readonly killFirst: (pid: number) => Promise<void>) {
    super({ name: "local", host: "local", modelDir: root });
  }
  private raced = false;
  override async signal(pid: number, signal: NodeJS.Signals, expectedStartTime: string, options?: { deadlineMs?: number }): Promise<boolean> {
    if (!this.raced) {
      this.raced = true;
      await this.killFirst(pid);
      for (let i = 0; i < 100 && (await isAlive(pid)); i++) await new Promise((r) => setTimeout(r, 20));
    }
    return super.signal(pid, signal, expectedStartTime, options);
  }
}

test("a wrapper that exits between the look and the signal is not taken for a recycled pid: the engine it leaves is stopped", async () => {
  const planned = plannedProcess("stage", 3, "local", join(root, "exits-before-signal"));
  await node.mkdir(planned.runDir);
  const started = await startEngineProcess(node, planned, engineArgv(planned.runDir));
  const engine = await engineOf(started.pid);
  strays.push(engine);
  const racing = new ExitsBeforeSignalNode(async (pid) => void (await run("kill", ["-9", String(pid)])));
  expect(await stopEngineProcess(racing, started, 2_000)).toBe("orphans-stopped");
  expect(await isAlive(engine)).toBe(false);
});

test("a process group that exits between the look and the signal is gone", async () => {
  const planned = plannedProcess("stage", 4, "local", join(root, "group-exits-before-signal"));
  await node.mkdir(planned.runDir);
  const started = await startEngineProcess(node, planned, engineArgv(planned.runDir));
  const engine = await engineOf(started.pid);
  strays.push(engine);
  // A group already gone by then (under load the race can end before it is staged) is the same case.
  const racing = new ExitsBeforeSignalNode(async (pid) => void (await run("kill", ["-9", "--", `-${pid}`]).catch(() => undefined)));
  expect(await stopEngineProcess(racing, started, 2_000)).toBe("gone");
  expect(await isAlive(engine)).toBe(false);
});

/** An engine (as engineArgv) that first starts `helper`, a sh command left running in its group. */
function engineWithHelper(runDir: string, helper: string): string[] {
  const [node, ...rest] = engineArgv(runDir);
  return ["sh", "-c", `(${helper}) & exec "$0" "$@"`, node!, ...rest];
}

/**
 * An engine (as engineArgv) started as a launch starts it, under `name`, with `helper` left running
 * in its process group; the helper's pid (killed after the file at the latest).
 */
async function startWithHelper(index: number, name: string, helper: string, command: string): Promise<{ started: LedgerProcess; helper: number }> {
  const planned = plannedProcess("stage", index, "local", join(root, name));
  await node.mkdir(planned.runDir);
  const started = await startEngineProcess(node, planned, engineWithHelper(planned.runDir, helper));
  const pid = await memberOf(started.pid, command);
  strays.push(pid);
  return { started, helper: pid };
}

/** The engine under `wrapper` crashes (SIGSEGV); returns once the wrapper has recorded it and gone. */
async function crashEngine(wrapper: number): Promise<void> {
  await run("kill", ["-SEGV", String(await engineOf(wrapper))]);
  for (let i = 0; i < 100 && (await isAlive(wrapper)); i++) await new Promise((r) => setTimeout(r, 20));
  expect(await isAlive(wrapper)).toBe(false);
}

/** The pid of the process in group `group` whose command line starts with `command`. */
async function memberOf(group: number, command: string): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const { stdout } = await run("ps", ["-A", "-o", "pgid=,pid=,args="]);
    const line = stdout.split("\n").find((l) => {
      const [pgid, , ...args] = l.trim().split(/\s+/);
      return pgid === String(group) && args.join(" ").startsWith(command);
    });
    if (line !== undefined) return Number(line.trim().split(/\s+/)[1]);
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`no ${command} in group ${group}`);
}

// Regression: the stop waited for the wrapper alone, and said "terminated" while a helper the engine
// started, ignoring SIGTERM, ran on in its group for good.
test("a helper the engine started that ignores SIGTERM is stopped with it: SIGKILL after the grace", async () => {
  const { started, helper } = await startWithHelper(5, "helper-ignores-term", "trap '' TERM; exec sleep 302", "sleep 302");
  expect(await stopEngineProcess(node, started, 1_000)).toBe("terminated");
  expect(await isAlive(helper)).toBe(false);
});

// Regression: after a crash only group members naming the run directory were stopped; a child of
// the engine running another program was never signalled.
test("the children an engine left when it crashed are stopped once its wrapper has recorded the exit", async () => {
  const { started, helper } = await startWithHelper(6, "crash-leaves-child", "exec sleep 303", "sleep 303");
  await crashEngine(started.pid);
  expect(await isAlive(helper)).toBe(true);
  expect(await stopEngineProcess(node, started, { graceMs: 1_000, seenGone: true })).toBe("orphans-stopped");
  expect(await isAlive(helper)).toBe(false);
});

test("a wrapper that recorded its exit long ago: only members naming the run directory, or carrying its mark, are taken for ours", async () => {
  // The helper sheds the launch's mark, as a process that took over the group's id later would not have it.
  const { started, helper } = await startWithHelper(7, "ended-long-ago", `exec env -u ${launchMark} sleep 304`, "sleep 304");
  await crashEngine(started.pid);
  // As if the daemon came back an hour after the crash: the group may since have emptied and its id
  // been taken by processes that are not ours (here it was not, so the helper is left running).
  const anHourAgo = new Date(Date.now() - 3_600_000);
  await utimes(started.exitFile, anHourAgo, anHourAgo);
  expect(await stopEngineProcess(node, started, { graceMs: 1_000, seenGone: true })).toBe("gone");
  expect(await isAlive(helper)).toBe(true);
});

test("a wrapper that recorded its exit long ago: a member carrying its mark is ours, and is stopped", async () => {
  const { started, helper } = await startWithHelper(8, "ended-long-ago-marked", "exec sleep 305", "sleep 305");
  await crashEngine(started.pid);
  const anHourAgo = new Date(Date.now() - 3_600_000);
  await utimes(started.exitFile, anHourAgo, anHourAgo);
  expect(await stopEngineProcess(node, started, { graceMs: 1_000, seenGone: true })).toBe("orphans-stopped");
  expect(await isAlive(helper)).toBe(false);
});

test("an engine that puts itself in the background and exits 0: what it left is stopped, and how it ended names it even afterwards", async () => {
  const planned = plannedProcess("stage", 9, "local", join(root, "daemonized"));
  await node.mkdir(planned.runDir);
  // A nap of its own length: no other test's sleep is taken for it.
  const nap = `sleep ${1000 + Math.floor(Math.random() * 100_000)}`;
  const started = await startEngineProcess(node, planned, ["sh", "-c", `setsid ${nap} </dev/null >/dev/null 2>&1 & exit 0`]);
  for (let i = 0; i < 100 && (await isAlive(started.pid)); i++) await new Promise((r) => setTimeout(r, 20));
  let left = 0;
  for (let i = 0; i < 100 && left === 0; i++) {
    const { stdout } = await run("ps", ["-A", "-o", "pid=,args="]);
    left = Number(
      stdout
        .split("\n")
        .find((l) => l.trim().endsWith(` ${nap}`))
        ?.trim()
        .split(/\s+/)[0] ?? 0,
    );
    if (left === 0) await new Promise((r) => setTimeout(r, 20));
  }
  expect(left).toBeGreaterThan(0);
  strays.push(left);
  const said = `exited with status 0, leaving 1 process in the background (pid ${left}: the engine put itself there`;
  expect(await describeExit(node, started)).toContain(said);
  expect(await stopEngineProcess(node, started, { graceMs: 1_000, seenGone: true })).toBe("orphans-stopped");
  expect(await isAlive(left)).toBe(false);
  // Read after the teardown, as a death's evidence often is: still said.
  expect(await describeExit(node, started)).toContain(said);
});
