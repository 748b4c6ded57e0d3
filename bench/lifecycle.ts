/**
 * `npm run bench -- lifecycle [--rounds N] [--requests N]`: cluster lifecycle figures on loopback
 * SSH nodes (real sshd, the reference engine, the embedded router):
 *   - launch start → ready, per phase, from the launch timeline (median over N rounds, default 10);
 *   - `kill -9` of a stage engine → router entry removed (YAML), → the router no longer routing the
 *     model, → every process gone (ps), with the health monitor's exit watch driving the teardown
 *     (median of N; goal ≤ 1000 ms);
 *   - router proxy overhead per request against a real coordinator: bench/router.ts's
 *     measureProxyOverhead, direct vs routed interleaved (goal ≤ 2 ms median).
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { launchCluster, superviseCluster, type TimelineEvent } from "../src/launch/index.js";
import { enginePidOf, makeContext, makeRequest, startLifecycleWorld, type LifecycleWorld } from "../test/launch/lifecycle-fixture.js";
import { intArg } from "./args.js";
import { measureProxyOverhead } from "./router.js";

const run_ = promisify(execFile);

export async function run(args: string[]): Promise<object> {
  const rounds = intArg(args, "--rounds", 10);
  const requests = intArg(args, "--requests", 500);
  const world = await startLifecycleWorld({ firstHost: 90 });
  try {
    const phases: Record<string, number[]> = {};
    const kill = { toRouterEntryRemovedMs: [] as number[], toRouterStopsRoutingMs: [] as number[], toAllProcessesGoneMs: [] as number[] };
    let overhead: object | undefined;
    for (let round = 0; round < rounds; round++) {
      const cluster = `bench-${round}`;
      const context = makeContext(world);
      const result = await launchCluster(await makeRequest(world, { cluster }), context);
      for (const [phase, ms] of Object.entries(phaseDurations(result.timeline))) (phases[phase] ??= []).push(ms);
      await waitRouted(world, true);

      if (round === 0) {
        overhead = await measureProxyOverhead({ directUrl: result.coordinatorUrl, routedUrl: world.router.url, model: world.modelName, requests, warmup: 50 });
      }

      // kill -9 one stage's engine process; the supervisor's exit watch takes it from there.
      const entry = (await world.ledger.read(cluster))!;
      const supervision = superviseCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
      await new Promise((r) => setTimeout(r, 100));
      const stage = entry.processes.find((p) => p.role === "stage" && p.index === 1)!;
      const node = world.nodeFor(stage.node);
      const engine = await enginePidOf(node, stage.pid);
      const runRoot = join(world.root, "run", cluster);
      const killedAt = performance.now();
      await run_("kill", ["-9", String(engine)]);
      const [removed, unrouted, gone] = await Promise.all([
        until(async () => (await world.registrar.lookup(cluster)) === undefined),
        until(async () => !(await isRouted(world))),
        until(async () => (await localProcessesMentioning(runRoot)).length === 0),
      ]);
      kill.toRouterEntryRemovedMs.push(removed - killedAt);
      kill.toRouterStopsRoutingMs.push(unrouted - killedAt);
      kill.toAllProcessesGoneMs.push(gone - killedAt);
      const outcome = await supervision.ended;
      await supervision.stop();
      if (!outcome.teardown.ok) throw new Error(`round ${round}: teardown failed: ${String(outcome.teardown.error)}`);
    }
    const launch = Object.fromEntries(Object.entries(phases).map(([phase, samples]) => [phase, summary(samples)]));
    const killFigures = Object.fromEntries(Object.entries(kill).map(([k, samples]) => [k, summary(samples)]));
    const goneMedian = median(kill.toAllProcessesGoneMs);
    const removedMedian = median(kill.toRouterEntryRemovedMs);
    return {
      rounds,
      launchToReadyMs: launch,
      killStage: {
        ...killFigures,
        goalMs: 1000,
        // Median ÷ goal: below 1 meets the goal.
        goneVsGoalRatio: round3(goneMedian / 1000),
        removedVsGoalRatio: round3(removedMedian / 1000),
        meetsGoal: goneMedian <= 1000 && removedMedian <= 1000,
      },
      routerOverheadVsCoordinator: overhead,
    };
  } finally {
    await world.close();
  }
}

/** ms spent in each phase: from one timeline step to the next, named after the step it ends with; plus the total. */
function phaseDurations(timeline: TimelineEvent[]): Record<string, number> {
  const out: Record<string, number> = {};
  for (let i = 1; i < timeline.length; i++) {
    const ms = Date.parse(timeline[i]!.at) - Date.parse(timeline[i - 1]!.at);
    out[timeline[i]!.step] = (out[timeline[i]!.step] ?? 0) + ms;
  }
  out.total = Date.parse(timeline.at(-1)!.at) - Date.parse(timeline[0]!.at);
  return out;
}

async function isRouted(world: LifecycleWorld): Promise<boolean> {
  const models = (await fetch(`${world.router.url}/v1/models`).then((r) => r.json())) as { data: unknown[] };
  return models.data.length > 0;
}

async function waitRouted(world: LifecycleWorld, routed: boolean): Promise<void> {
  await until(async () => (await isRouted(world)) === routed);
}

/** The moment (performance.now()) `check` first holds, polling every 2 ms; 10 s deadline. */
async function until(check: () => Promise<boolean>): Promise<number> {
  const deadline = performance.now() + 10_000;
  for (;;) {
    if (await check()) return performance.now();
    if (performance.now() > deadline) throw new Error("condition not met within 10 s");
    await new Promise((r) => setTimeout(r, 2));
  }
}

// The loopback nodes share this machine: the local ps sees every node's processes.
async function localProcessesMentioning(needle: string): Promise<string[]> {
  const { stdout } = await run_("ps", ["-eo", "stat=,args="], { maxBuffer: 16 << 20 });
  return stdout.split("\n").filter((line) => line.includes(needle) && !line.trim().startsWith("Z"));
}

function summary(samples: number[]): { medianMs: number; minMs: number; maxMs: number } {
  return { medianMs: round3(median(samples)), minMs: round3(Math.min(...samples)), maxMs: round3(Math.max(...samples)) };
}

function median(samples: number[]): number {
  const sorted = [...samples].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

function round3(value: number): number {
  return Math.round(value * 1000) / 1000;
}
