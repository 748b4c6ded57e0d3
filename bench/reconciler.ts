/**
 * `npm run bench -- reconciler [--edits N] [--idle-seconds S] [--definitions N] [--skip-checkout]`:
 * the daemon's figures.
 *   - edit → status latency of a plan-only change (distributed disabled), median of N edits
 *     (default 20); goal ≤ 200 ms. The daemon's default 100 ms debounce is part of it.
 *   - daemon CPU over S seconds idle (default 60) with N stopped definitions (default 1000), from
 *     /proc/<pid>/stat utime+stime, as % of one core; goal < 1 %. Baseline: a bare node process
 *     measured over the same window. RSS from /proc/<pid>/status. Then every definition removed at
 *     once: ms until the last status file is gone, and its ratio to the first convergence.
 *   - `git checkout` of a commit adding a demo cluster (two local nodes, reference engine, the demo
 *     model) → `shardctl wait --for condition=Ready` returning; goal ≤ 5 s.
 */
import { execFile, spawn } from "node:child_process";
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { pino } from "pino";
import { makeTestModel } from "../src/planner/test-model/index.js";
import { startDaemon } from "../src/reconciler/index.js";
import {
  definitionText,
  freePort,
  freePortRange,
  revisionOf,
  runShardctl,
  sleep,
  spawnDaemon,
  startWorld,
  waitWatching,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../test/reconciler/daemon-fixture.js";
import { intArg } from "./args.js";

const run_ = promisify(execFile);
const clockTicks = 100; // USER_HZ on Linux

export async function run(args: string[]): Promise<object> {
  const edits = intArg(args, "--edits", 20);
  const idleSeconds = intArg(args, "--idle-seconds", 60);
  const definitions = intArg(args, "--definitions", 1000);
  return {
    editToStatus: await measureEditToStatus(edits),
    idle: await measureIdle(definitions, idleSeconds),
    ...(args.includes("--skip-checkout") ? {} : { checkoutToReady: await measureCheckoutToReady() }),
  };
}

/** Median ms from an edit (rename into place) to the status file describing its revision. */
async function measureEditToStatus(edits: number): Promise<object> {
  const world = await startWorld();
  const daemon = await startDaemon({ dir: world.clustersDir, settingsFile: world.settingsFile, log: pino({ level: "silent" }) });
  try {
    const statusFile = join(world.clustersDir, "edit.status.json");
    const samples: number[] = [];
    for (let i = 0; i <= edits; i++) {
      const text = definitionText(world, { nodes: ["l1", "l2"], contextLength: 256 * (i + 1) });
      const started = performance.now();
      await writeDefinition(world, "edit", text);
      const revision = await revisionOf(world, "edit");
      const deadline = Date.now() + 10_000;
      for (;;) {
        const status = await readFile(statusFile, "utf8").catch(() => "");
        if (status.includes(`"observedRevision": "${revision}"`)) break;
        if (Date.now() > deadline) throw new Error(`edit ${i}: no status for ${revision} in 10 s`);
        await sleep(2);
      }
      // The first edit also creates the cluster (a first plan); it is a warm-up.
      if (i > 0) samples.push(performance.now() - started);
      await sleep(150);
    }
    return { edits, medianMs: round(median(samples)), p90Ms: round(quantile(samples, 0.9)), debounceMs: 100, goalMs: 200, meetsGoal: median(samples) <= 200 };
  } finally {
    await daemon.stop();
    await world.close();
  }
}

/** CPU and RSS of a real daemon process watching `count` stopped definitions, idle. */
async function measureIdle(count: number, seconds: number): Promise<object> {
  const world = await startWorld();
  try {
    for (let i = 0; i < count; i++) {
      await writeFile(join(world.clustersDir, `c${String(i).padStart(4, "0")}.toml`), definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
    }
    // The default log level (info): one line per pass is part of what an idle daemon costs.
    const daemon = await spawnDaemon(world, { SHARDCTL_LOG_LEVEL: "info" });
    const settleStart = Date.now();
    await waitWatching(daemon, 60_000);
    const pid = daemon.child.pid!;
    // Initial convergence: every definition has its status file.
    const deadline = Date.now() + 300_000;
    while ((await statusCount(world)) < count) {
      if (Date.now() > deadline) throw new Error("the daemon did not write every status file in 300 s");
      await sleep(250);
    }
    const settleMs = Date.now() - settleStart;
    await sleep(1_000);

    const baseline = spawn(process.execPath, ["-e", "setInterval(() => {}, 1000)"], { stdio: "ignore" });
    await sleep(500);
    const before = await cpuTicks(pid);
    const baseBefore = await cpuTicks(baseline.pid!);
    const statusMtimes = await statusSnapshot(world);
    await sleep(seconds * 1000);
    const after = await cpuTicks(pid);
    const baseAfter = await cpuTicks(baseline.pid!);
    const rssBytes = await rssOf(pid);
    const rewritten = countChanged(statusMtimes, await statusSnapshot(world));
    baseline.kill("SIGKILL");
    // Every definition removed at once (a branch switch, a revert): until the last status file is gone.
    const removing = Date.now();
    await Promise.all(Array.from({ length: count }, (_, i) => rm(join(world.clustersDir, `c${String(i).padStart(4, "0")}.toml`))));
    const removeDeadline = Date.now() + 600_000;
    while ((await statusCount(world)) > 0) {
      if (Date.now() > removeDeadline) throw new Error("the daemon did not remove every status file in 600 s");
      await sleep(250);
    }
    const removalMs = Date.now() - removing;
    daemon.child.kill("SIGTERM");
    await daemon.exited;
    const cpuPercent = ((after - before) / clockTicks / seconds) * 100;
    const basePercent = ((baseAfter - baseBefore) / clockTicks / seconds) * 100;
    return {
      definitions: count,
      seconds,
      resyncSeconds: 30,
      initialConvergenceMs: settleMs,
      cpuPercentOfCore: round(cpuPercent, 3),
      baselineBareNodeCpuPercent: round(basePercent, 3),
      ratioToBaseline: basePercent > 0 ? round(cpuPercent / basePercent, 1) : null,
      rssMiB: round(rssBytes / 2 ** 20, 1),
      statusFilesRewrittenWhileIdle: rewritten,
      // Removing them all (each pruned: nothing ever launched) against writing them all at the start.
      removalOfAllMs: removalMs,
      removalToInitialConvergence: round(removalMs / settleMs, 2),
      goalPercent: 1,
      meetsGoal: cpuPercent < 1,
    };
  } finally {
    await world.close();
  }
}

/** `git checkout` of a commit adding a demo cluster → `shardctl wait` returning 0. */
async function measureCheckoutToReady(): Promise<object> {
  const world = await startWorld();
  try {
    // The demo's model and its two local nodes, distributed serving on.
    const demoModel = join(world.root, "models", "demo-llama");
    await makeTestModel(demoModel, { layers: 8, hidden: 128, heads: 4, kvHeads: 2, vocab: 512, seed: 42 });
    await writeSettings(world, { enabled: true });
    const git = (a: string[]) => run_("git", ["-C", world.root, "-c", "user.name=b", "-c", "user.email=b@example.invalid", ...a]);
    await writeFile(join(world.root, ".gitignore"), "*.status.json\nstate/\nmodels/\nnodes/\n*.log\nbin/\n");
    // The directory stays in every commit (as in any repository holding other clusters).
    await writeFile(join(world.clustersDir, ".gitkeep"), "");
    await git(["add", "-A", ".gitignore", "shardctl.toml", "clusters/.gitkeep"]);
    await git(["commit", "-q", "-m", "base"]);
    await git(["branch", "-q", "base"]);
    const text = definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) }).replace(
      JSON.stringify(world.modelDir),
      JSON.stringify(demoModel),
    );
    await writeDefinition(world, "demo", text);
    await git(["add", "clusters/demo.toml"]);
    await git(["commit", "-q", "-m", "add demo"]);
    await git(["branch", "-q", "with-demo"]);
    await git(["checkout", "-q", "base"]);

    const daemon = await spawnDaemon(world);
    await waitWatching(daemon);
    const started = performance.now();
    await git(["checkout", "-q", "with-demo"]);
    const checkoutMs = performance.now() - started;
    const waited = await runShardctl(world, ["wait", "demo", "--for", "condition=Ready", "--timeout", "60s"]);
    const totalMs = performance.now() - started;
    if (waited.code !== 0) throw new Error(`wait failed: ${waited.stderr}`);
    const status = JSON.parse(await readFile(join(world.clustersDir, "demo.status.json"), "utf8")) as {
      timeline: Array<{ at: string; step: string }>;
      history: Array<{ action: string; durationMs: number }>;
    };
    const launchPass = status.history.find((h) => h.action === "launch");

    // Back to the base commit: the cluster is pruned.
    await git(["checkout", "-q", "base"]);
    const gone = Date.now() + 30_000;
    while (
      Date.now() < gone &&
      (await readFile(join(world.clustersDir, "demo.status.json"), "utf8").then(
        () => true,
        () => false,
      ))
    )
      await sleep(100);
    daemon.child.kill("SIGTERM");
    await daemon.exited;
    return {
      checkoutMs: round(checkoutMs),
      checkoutToWaitReturnedMs: round(totalMs),
      launchPassMs: launchPass?.durationMs ?? null,
      goalMs: 5000,
      meetsGoal: totalMs <= 5000,
    };
  } finally {
    await world.close();
  }
}

async function cpuTicks(pid: number): Promise<number> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8");
  // Fields after the command name (which may hold spaces) start after the last ")".
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return Number(fields[11]) + Number(fields[12]); // utime, stime (fields 14 and 15)
}

async function rssOf(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  const kb = Number(/VmRSS:\s+(\d+)\s+kB/.exec(status)?.[1] ?? 0);
  return kb * 1024;
}

async function statusCount(world: DaemonWorld): Promise<number> {
  const { readdir } = await import("node:fs/promises");
  return (await readdir(world.clustersDir)).filter((f) => f.endsWith(".status.json")).length;
}

async function statusSnapshot(world: DaemonWorld): Promise<Map<string, number>> {
  const { readdir, stat } = await import("node:fs/promises");
  const out = new Map<string, number>();
  for (const f of (await readdir(world.clustersDir)).filter((n) => n.endsWith(".status.json"))) {
    out.set(f, (await stat(join(world.clustersDir, f))).mtimeMs);
  }
  return out;
}

function countChanged(a: Map<string, number>, b: Map<string, number>): number {
  let n = 0;
  for (const [k, v] of b) if (a.get(k) !== v) n++;
  return n;
}

function median(values: number[]): number {
  return quantile(values, 0.5);
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((x, y) => x - y);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

function round(value: number, digits = 1): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
