/**
 * Whom an exit is blamed on when the engine does not say why it exited (mlxcel, mlx-lm, an engine of
 * another's making): the exits themselves. Real processes run detached under the launch's wrapper on
 * this machine: stage-1 is killed by SIGKILL (as by the OOM killer) and the coordinator, which waits
 * on it, exits 69 a moment later because its peer is gone. Judged from the coordinator's exit (the
 * one a monitor may see first), the death is stage-1's, the coordinator's exit its consequence.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { judgeExit } from "../../src/health/judge-exit.js";
import type { WatchedProcess } from "../../src/health/index.js";
import { LocalNode } from "../../src/nodes/index.js";

let dir: string;
const node = new LocalNode({ name: "n1", host: "local", modelDir: tmpdir() });
const started: WatchedProcess[] = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-exit-order-"));
});
afterAll(async () => {
  for (const p of started) await node.signal(p.pid, "SIGKILL", p.startTime).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
});

async function start(label: string, role: "stage" | "coordinator", script: string): Promise<WatchedProcess> {
  const exitFile = join(dir, `${label}.exit`);
  const logFile = join(dir, `${label}.log`);
  const { pid, startTime } = await node.startDetached(["sh", "-c", script], { logFile, cwd: dir, exitStatusFile: exitFile });
  const process: WatchedProcess = { role, ...(role === "stage" ? { index: 1 } : {}), node: "n1", pid, startTime, logFile, exitFile };
  started.push(process);
  return process;
}

/**
 * The child of `pid` whose command starts with `command` (the wrapper's engine), once there is one:
 * on a loaded machine the wrapper forks it a moment after it starts, and its first child may be
 * the subshell that reads the OOM count before the engine starts (killing that one would leave the
 * engine running).
 */
async function childOf(pid: number, command: string): Promise<number> {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const lines = (await node.run(["ps", "-o", "pid=,args=", "--ppid", String(pid)])).stdout.split("\n");
    const child = lines.map((line) => /^\s*(\d+)\s+(.*)$/.exec(line)).find((m) => m !== null && m[2]!.startsWith(command));
    if (child != null) return Number(child[1]);
    if (Date.now() > deadline) throw new Error(`process ${pid} started no "${command}" within 10 s`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

async function gone(process: WatchedProcess): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await node.processStartTime(process.pid)) === process.startTime && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  expect(await node.processStartTime(process.pid)).not.toBe(process.startTime);
}

const judge = (first: WatchedProcess, processes: WatchedProcess[]) =>
  judgeExit(first, {
    cluster: { cluster: "c", processes, ports: [], engine: "mlxcel" },
    nodeFor: () => node,
    seenGone: (p) => p === first,
    signal: new AbortController().signal,
  });

test("a member killed by a signal before the one seen first is blamed; the first is its consequence", async () => {
  const stage = await start("stage-1", "stage", "exec sleep 600");
  const coordinator = await start("coordinator", "coordinator", `while [ ! -s ${JSON.stringify(join(dir, "stage-1.exit"))} ]; do sleep 0.01; done; exit 69`);
  // The engine under the wrapper is killed, as the OOM killer picks it: the wrapper records 137.
  process.kill(await childOf(stage.pid, "sleep 600"), "SIGKILL");
  await gone(coordinator);
  await gone(stage);
  const judgement = await judge(coordinator, [stage, coordinator]);
  expect(judgement.blamed).toBe(stage);
  expect(judgement.consequences).toEqual([{ process: coordinator, after: "after stage-1 went first, which was killed by SIGKILL" }]);
  // Judged from the member that went first, the blame stays.
  expect((await judge(stage, [stage, coordinator])).blamed).toBe(stage);
});

test("a member that still runs, or one that exited after the first, takes no blame", async () => {
  const running = await start("stage-2", "stage", "exec sleep 600");
  const first = await start("first", "coordinator", "exit 3");
  await gone(first);
  const later = await start("later", "stage", "exit 69");
  await gone(later);
  const judgement = await judge(first, [running, first, later]);
  expect(judgement.blamed).toBe(first);
  expect(judgement.consequences).toEqual([]);
});

test("two exits of their own making on two nodes (no order known): the stage the coordinator's last log lines name is blamed; without such a word, the one seen first keeps it", async () => {
  const stage = { ...(await start("stage-own", "stage", "sleep 0.3; exit 3")), node: "n2" };
  started.push(stage);
  const coordinator = await start(
    "coordinator-after",
    "coordinator",
    `while [ ! -s ${JSON.stringify(join(dir, "stage-own.exit"))} ]; do sleep 0.01; done; echo "link to stage-1 closed: exiting"; exit 1`,
  );
  await gone(coordinator);
  await gone(stage);
  const judgement = await judge(coordinator, [stage, coordinator]);
  expect(judgement.blamed).toBe(stage);
  expect(judgement.consequences).toEqual([{ process: coordinator, after: "after stage-1 went first" }]);
  expect((await judge(stage, [stage, coordinator])).blamed).toBe(stage);

  // The coordinator crashes first and says nothing of a stage; the stage, losing it, exits too.
  const crashed = await start("coordinator-crash", "coordinator", `echo "panicked at src/server.rs: index out of bounds"; exit 101`);
  const follower = {
    ...(await start("stage-follows", "stage", `while [ ! -s ${JSON.stringify(join(dir, "coordinator-crash.exit"))} ]; do sleep 0.01; done; exit 1`)),
    node: "n2",
  };
  started.push(follower);
  await gone(crashed);
  await gone(follower);
  expect((await judge(crashed, [follower, crashed])).blamed).toBe(crashed);
});
