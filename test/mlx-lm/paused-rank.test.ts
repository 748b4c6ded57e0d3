/**
 * A real mlx-lm ring whose rank 1 (stage 0, the first layers) is stopped (SIGSTOP) as soon as it is
 * spawned: it never joins the ring, and rank 0 waits for it in an accept with no timeout. The
 * status file, read every 100 ms while the launch waits, shows the stopped rank paused (which pid,
 * what the launch waits for and until when) before the launch fails; the launch ends at its
 * deadline naming it, nothing is left running, and once ranks stop stopping the cluster is Ready.
 * The stand-in `[engine] python` stops itself while a flag file exists, then becomes the venv's
 * python. Installs mlx-lm into `.venv-mlx` when missing; needs `npm run build`.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import pino from "pino";
import { afterAll, beforeAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/index.js";
import { startDaemon, type ClusterStatus, type Daemon } from "../../src/reconciler/index.js";
import { ensureMlxVenv } from "../support/mlx-venv.js";
import {
  conditionOf,
  freePort,
  freePortRange,
  isReadyAt,
  processesOf,
  readStatusFile,
  removeDefinition,
  revisionOf,
  sleep,
  startWorld,
  twoStageDefinition,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon;
let python: string;
let qwenDir: string;
let stopFlag: string;

beforeAll(async () => {
  const venvPython = (await ensureMlxVenv()).python;
  world = await startWorld({ sshNodes: 2 });
  await writeSettings(world, { restartBudget: 5 });
  qwenDir = await mkdtemp(join(tmpdir(), "shardctl-mlx-paused-"));
  await makeTestModel(qwenDir, { family: "qwen2", layers: 4, hidden: 64, heads: 4, kvHeads: 2, seed: 7 });
  stopFlag = join(world.root, "stop-rank-1");
  python = join(world.root, "python-stopping-rank-1");
  await writeFile(python, `#!/bin/sh\nif [ "$MLX_RANK" = 1 ] && [ -e ${JSON.stringify(stopFlag)} ]; then kill -STOP $$; fi\nexec ${JSON.stringify(venvPython)} "$@"\n`, {
    mode: 0o755,
  });
  const log = pino({ level: "debug" }, pino.destination({ dest: join(world.root, "daemon.log"), sync: true }));
  daemon = await startDaemon({
    dir: world.clustersDir,
    settingsFile: world.settingsFile,
    log,
    resyncMs: 60_000,
    debounceMs: 50,
    launchDeadlines: { stageListenMs: 20_000, coordinatorHealthMs: 60_000, readinessMs: 60_000, stopGraceMs: 2_000 },
    monitor: { pollIntervalMs: 200, strikes: 2, generationWatchdog: { intervalMs: 1_000, timeoutMs: 3_000 } },
  });
}, 300_000);

afterAll(async () => {
  if (world !== undefined) await removeDefinition(world, "ring", 30_000);
  await daemon?.stop();
  const left = world === undefined ? [] : await ranksOf();
  await world?.close();
  if (qwenDir !== undefined) await rm(qwenDir, { recursive: true, force: true });
  expect(left).toEqual([]);
}, 120_000);

/** Processes of this world's ranks (the wrapper names the stand-in python; the engine, mlx_lm.server). */
async function ranksOf(): Promise<string[]> {
  return (await processesOf(world, [qwenDir])).filter((line) => line.includes("mlx_lm.server"));
}

/** The status file every 100 ms until `done` holds for a version; the versions seen. */
async function recordStatus(done: (s: ClusterStatus) => boolean, timeoutMs: number): Promise<ClusterStatus[]> {
  const seen: ClusterStatus[] = [];
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const status = await readStatusFile(world, "ring").catch(() => undefined);
    if (status !== undefined) {
      seen.push(status);
      if (done(status)) return seen;
    }
    await sleep(100);
  }
  throw new Error(`not within ${timeoutMs} ms; last status: ${JSON.stringify(seen.at(-1))}`);
}

test("rank 1 stopped at spawn: paused in the status while the launch waits for it to join the ring, named at the deadline, torn down; Ready once it runs", async () => {
  await writeFile(stopFlag, "");
  const port = await freePort();
  const definition = twoStageDefinition(qwenDir, {
    engine: ['kind = "mlx-lm"', `python = ${JSON.stringify(python)}`, 'version = "0.32.2"'],
    coordinator: [`port = ${port}`],
    router: ["register = false"],
    portRange: await freePortRange(["127.0.0.1", ...world.hosts.values()]),
  });
  await writeDefinition(world, "ring", definition);

  // While the launch waits: Ready=False (Launching), stage 0 (rank 1, on n1) paused, no failure yet.
  const waiting = (await recordStatus((s) => s.timeline.some((e) => e.step === "stage-0-paused"), 120_000)).at(-1)!;
  expect(waiting.timeline.map((e) => e.step)).not.toContain("launch-failed");
  expect(conditionOf(waiting, "Ready")).toMatchObject({ status: "False", reason: "Launching" });
  expect(conditionOf(waiting, "Ready")!.message).toMatch(/^nothing serves this revision yet: its processes are starting.*; stage-0 is stopped, which holds the launch/);
  const paused = waiting.timeline.find((e) => e.step === "stage-0-paused")!;
  expect(paused.detail).toMatch(
    /^stopped \(pid \d+ in state T, a stop signal such as SIGSTOP\) on n1, 2 looks in a row since \S+: the launch waits for stage-0 to print \//,
  );
  expect(paused.detail).toMatch(/ until \S+Z, which cannot happen while it is stopped \(kill -CONT \d+ continues it\)/);
  const pid = Number(/^stopped \(pid (\d+)/.exec(paused.detail!)![1]);
  await rm(stopFlag);

  // At the deadline: StageListenTimeout naming the stopped rank; the stopped process is gone.
  const failed = (await recordStatus((s) => conditionOf(s, "Ready")?.reason === "StageListenTimeout", 60_000)).at(-1)!;
  expect(conditionOf(failed, "Ready")!.message).toMatch(new RegExp(`within 20000 ms; stage-0 on n1 is stopped \\(pid ${pid} in state T`));

  // The next launch forms the ring.
  const revision = await revisionOf(world, "ring");
  const ready = await waitForStatus(world, "ring", (s) => isReadyAt(s, revision) && s.stages.length === 2 && s.stages.every((c) => c.alive), 180_000);
  expect(ready.health).toBe("Healthy");
  expect(() => process.kill(pid, 0)).toThrow();
  // One rank per stage (each under its wrapper shell), none of them stopped.
  const ranks = (await ranksOf()).filter((line) => !/^\d+\s+\S+\s+sh -c /.test(line));
  expect(ranks, (await ranksOf()).join("\n")).toHaveLength(2);
  expect(ranks.filter((line) => /^\d+\s+T/.test(line))).toEqual([]);
}, 400_000);
