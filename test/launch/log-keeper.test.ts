/**
 * An engine's log is kept bounded while its cluster runs: a real process writes its log through the
 * start script's `>>` (O_APPEND) as fast as a shell loop goes; past the limit the log's end is kept
 * in `<log>.1` and the log emptied under the writer, whose next lines land at its start. On an SSH
 * node as on this machine (the loopback sshd shares this file system).
 */
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { keepLogsBounded, trimLogs } from "../../src/launch/index.js";
import { LocalNode, type NodeAccess } from "../../src/nodes/index.js";
import { startLifecycleWorld, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;
let dir: string;
const started: Array<{ node: NodeAccess; pid: number; startTime: string }> = [];

beforeAll(async () => {
  world = await startLifecycleWorld({ count: 1 });
  dir = await mkdtemp(join(tmpdir(), "shardctl-log-keeper-"));
}, 120_000);
afterAll(async () => {
  for (const p of started) await p.node.signal(p.pid, "SIGKILL", p.startTime).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
  await world?.close();
});

/** A process that writes numbered 100-byte lines to its log for ever. */
async function flood(node: NodeAccess, name: string): Promise<string> {
  const logFile = join(dir, `${name}.log`);
  const line = "x".repeat(90);
  const { pid, startTime } = await node.startDetached(["sh", "-c", `i=0; while :; do i=$((i + 1)); echo "$i ${line}"; done`], {
    logFile,
    cwd: dir,
    exitStatusFile: join(dir, `${name}.exit`),
  });
  started.push({ node, pid, startTime });
  return logFile;
}

async function sizeOf(file: string): Promise<number> {
  return (await stat(file).catch(() => ({ size: 0 }))).size;
}

it.each(["local", "ssh"])("a log past its limit on a %s node: its end kept in <log>.1, the log emptied and written on from its start", async (kind) => {
  const node = kind === "local" ? new LocalNode({ name: "here", host: "local", modelDir: dir }) : world.nodeFor("node-1");
  const log = await flood(node, `flood-${kind}`);
  const limits = { limitBytes: 256 * 1024, keepBytes: 16 * 1024 };
  const deadline = Date.now() + 10_000;
  while ((await sizeOf(log)) <= limits.limitBytes && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
  const [trimmed] = (await trimLogs(node, [log, join(dir, "no-such.log")], limits))!;
  expect(trimmed?.file).toBe(log);
  expect(trimmed!.bytes).toBeGreaterThan(limits.limitBytes);
  const kept = await readFile(`${log}.1`, "utf8");
  expect(kept.length).toBe(limits.keepBytes);
  // The writer goes on at the start of the emptied file: its first line is a whole one, numbered
  // past the lines the kept end holds.
  await new Promise((r) => setTimeout(r, 100));
  const first = (await readFile(log, "utf8")).split("\n")[0]!;
  const lastKept = kept.trimEnd().split("\n").at(-1)!;
  expect(first).toMatch(/^\d+ x{90}$/);
  expect(Number(first.split(" ")[0])).toBeGreaterThan(Number(lastKept.split(" ")[0]));
});

it("kept bounded while supervised: looked at every interval until stopped, each one emptied said", async () => {
  const node = new LocalNode({ name: "here", host: "local", modelDir: dir });
  const log = await flood(node, "supervised");
  const said: string[] = [];
  const keeper = keepLogsBounded(
    { processes: [{ node: "here", logFile: log } as never] },
    () => node,
    { intervalMs: 200, limitBytes: 256 * 1024, keepBytes: 16 * 1024 },
    (n, file) => said.push(`${n} ${file}`),
  );
  try {
    const deadline = Date.now() + 15_000;
    while (said.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(said.slice(0, 2)).toEqual([`here ${log}`, `here ${log}`]);
  } finally {
    await keeper.stop();
  }
  const after = said.length;
  await new Promise((r) => setTimeout(r, 600));
  expect(said.length).toBe(after);
});

it("a flood brings the next look sooner: a log emptied at one look is looked at again within a quarter of the interval", async () => {
  const node = new LocalNode({ name: "here", host: "local", modelDir: dir });
  const log = await flood(node, "flooded");
  const said: number[] = [];
  // A 4 s interval: looks that only doubled while quiet (0.27, 0.53, 1.07, 2.13 s apart) would
  // come twice more in the 3.5 s watched below.
  const keeper = keepLogsBounded(
    { processes: [{ node: "here", logFile: log } as never] },
    () => node,
    { intervalMs: 4_000, limitBytes: 64 * 1024, keepBytes: 8 * 1024 },
    () => said.push(Date.now()),
  );
  try {
    const deadline = Date.now() + 15_000;
    while (said.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(said.length).toBe(1);
    await new Promise((r) => setTimeout(r, 3_500));
    // Every 267 ms (a 15th of the interval) while the flood goes on, plus each look's own time:
    // at least 3 more even on a loaded machine (looks of half a second each), against 2.
    expect(said.length).toBeGreaterThanOrEqual(4);
  } finally {
    await keeper.stop();
  }
});

it("an engine that floods its log from its start is looked at within a 15th of the interval, not a whole one", async () => {
  const node = new LocalNode({ name: "here", host: "local", modelDir: dir });
  const log = await flood(node, "from-start");
  const said: number[] = [];
  const started = Date.now();
  const keeper = keepLogsBounded(
    { processes: [{ node: "here", logFile: log } as never] },
    () => node,
    { intervalMs: 30_000, limitBytes: 64 * 1024, keepBytes: 8 * 1024 },
    () => said.push(Date.now()),
  );
  try {
    const deadline = Date.now() + 15_000;
    while (said.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(said.length).toBe(1);
    // 2 s (a 15th of 30 s), and the command's own time; a first look at the interval would be 30 s.
    expect(said[0]! - started).toBeLessThan(10_000);
  } finally {
    await keeper.stop();
  }
});

it("a node whose look does not finish (its disk hangs) is left alone a while, not asked again at every look", async () => {
  const node = new LocalNode({ name: "here", host: "local", modelDir: dir });
  // The look measures each log with wc: one that hangs, as on a frozen file system, counting its calls.
  const slowBin = join(dir, "slow-bin");
  const calls = join(dir, "wc-calls");
  await mkdir(slowBin, { recursive: true });
  const wc = (await node.run(["sh", "-c", "command -v wc"])).stdout.trim();
  await writeFile(join(slowBin, "wc"), `#!/bin/sh\necho called >> ${calls}\nsleep 5\nexec ${wc} "$@"\n`, { mode: 0o755 });
  const log = join(dir, "quiet.log");
  await writeFile(log, "hello\n");
  const path = process.env.PATH;
  process.env.PATH = `${slowBin}:${path ?? ""}`;
  try {
    const keeper = keepLogsBounded({ processes: [{ node: "here", logFile: log } as never] }, () => node, {
      intervalMs: 200,
      limitBytes: 1 << 20,
      keepBytes: 1024,
      lookDeadlineMs: 500,
      unansweredPauseMs: 60_000,
    });
    await new Promise((r) => setTimeout(r, 3_000));
    await keeper.stop();
  } finally {
    process.env.PATH = path;
  }
  expect((await readFile(calls, "utf8")).trim().split("\n")).toHaveLength(1);
});
