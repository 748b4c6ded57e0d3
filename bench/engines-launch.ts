/**
 * Launch → Ready of a two-stage cluster through the real daemon on two loopback sshd nodes, for
 * each engine kind in turn on the same nodes: the `launch-started` → `ready` span of the status
 * file's timeline (ms), and the time spent in each timeline step (the span from the step before).
 * Rounds alternate the kinds so both see the same machine load. Each round's cluster is removed
 * (definition deleted, status file gone) before the next one is written.
 */
import { pino } from "pino";
import { startDaemon, type ClusterStatus } from "../src/reconciler/index.js";
import {
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  revisionOf,
  startWorld,
  twoStageDefinition,
  writeDefinition,
  waitForStatus,
  type DaemonWorld,
} from "../test/reconciler/daemon-fixture.js";
import { median, round } from "./completion-timing.js";

export interface LaunchKind {
  /** Short name used in cluster names and the figures. */
  name: string;
  /** The definition's text for a cluster on nodes n1, n2. */
  definition(ports: { coordinator: number; range: string }): string;
}

/** The launch is measured on its own: no router registration. */
const unregistered = ["register = false"];

/** `[engine] kind = "mlx-lm"`: rank 0 (the last layers, on n2) serves HTTP at the coordinator port. */
export function mlxLmKind(python: string, modelDir: string, version: string): LaunchKind {
  const engine = ['kind = "mlx-lm"', `python = ${JSON.stringify(python)}`, `version = ${JSON.stringify(version)}`];
  return {
    name: "mlx-lm",
    definition: (ports) => twoStageDefinition(modelDir, { engine, coordinator: [`port = ${ports.coordinator}`], router: unregistered, portRange: ports.range }),
  };
}

/** `[engine] kind = "reference"` (the bundled shard-engine): two stages on n1, n2 and a coordinator on this machine. */
export function shardEngineKind(modelDir: string): LaunchKind {
  return {
    name: "shard-engine",
    definition: (ports) =>
      twoStageDefinition(modelDir, {
        engine: ['kind = "reference"'],
        coordinator: ['node = "local"', 'host = "127.0.0.1"', `port = ${ports.coordinator}`],
        router: unregistered,
        portRange: ports.range,
      }),
  };
}

/** ms of the launch in each timeline step (from the step before it), plus `total` = launch-started → ready. */
function phases(status: ClusterStatus): Record<string, number> {
  const timeline = status.timeline;
  const from = timeline.findLastIndex((e) => e.step === "launch-started");
  const to = timeline.findLastIndex((e) => e.step === "ready");
  if (from < 0 || to < from) throw new Error(`no launch-started → ready in the timeline: ${JSON.stringify(timeline)}`);
  const out: Record<string, number> = {};
  for (let i = from + 1; i <= to; i++) {
    const step = timeline[i]!.step;
    out[step] = (out[step] ?? 0) + Date.parse(timeline[i]!.at) - Date.parse(timeline[i - 1]!.at);
  }
  out.total = Date.parse(timeline[to]!.at) - Date.parse(timeline[from]!.at);
  return out;
}

export async function measureLaunchToReady(kinds: LaunchKind[], rounds: number): Promise<Record<string, object>> {
  const world = await startWorld({ sshNodes: 2 });
  const daemon = await startDaemon({
    dir: world.clustersDir,
    settingsFile: world.settingsFile,
    log: pino({ level: "silent" }),
    resyncMs: 60_000,
    debounceMs: 50,
    launchDeadlines: { stageListenMs: 60_000, coordinatorHealthMs: 60_000, readinessMs: 60_000, stopGraceMs: 2_000 },
  });
  const samples = new Map<string, Array<Record<string, number>>>(kinds.map((k) => [k.name, []]));
  const written: string[] = [];
  try {
    for (let r = 0; r < rounds; r++) {
      for (const kind of kinds) {
        const name = `${kind.name}-${r}`;
        const range = await freePortRange(["127.0.0.1", ...world.hosts.values()]);
        await writeDefinition(world, name, kind.definition({ coordinator: await freePort(), range }));
        written.push(name);
        const revision = await revisionOf(world, name);
        const ready = await waitForStatus(world, name, (s) => isReadyAt(s, revision), 120_000);
        samples.get(kind.name)!.push(phases(ready));
        await removeCluster(world, name);
        written.pop();
      }
    }
  } finally {
    for (const name of written) await removeCluster(world, name).catch(() => undefined);
    await daemon.stop();
    await world.close();
  }
  return Object.fromEntries(
    [...samples].map(([kind, runs]) => {
      const steps = [...new Set(runs.flatMap((s) => Object.keys(s)))].filter((s) => s !== "total");
      return [
        kind,
        {
          launchToReadyMs: { median: round(median(runs.map((s) => s.total!)), 0), samples: runs.map((s) => s.total!) },
          stepMs: Object.fromEntries(steps.map((step) => [step, round(median(runs.map((s) => s[step] ?? 0)), 0)])),
        },
      ];
    }),
  );
}

/** Delete a definition and wait for the daemon to tear the cluster down (its status file gone). */
async function removeCluster(world: DaemonWorld, name: string): Promise<void> {
  if (!(await removeDefinition(world, name, 60_000))) throw new Error(`${name}: status file still there 60 s after its definition was deleted`);
}
