/**
 * One daemon world for a test file: `useDaemonWorld` registers the file's beforeAll, afterEach and
 * afterAll, so the file holds its scenario only. Before the tests: the world (daemon-fixture.ts's
 * startWorld), its settings written when the file gives any, the file's own preparation, then the
 * daemon in this process unless the file starts its daemons itself. After each test: every status
 * version written so far validated against the schema. After the tests: every cluster defined or
 * in the ledger pruned the daemon's way (by the daemon that runs, or a fresh one when a test stopped it),
 * daemons stopped, the world closed, and no engine process may be left (any found is killed by pid
 * first, so a failed test leaves nothing running on the machine).
 */
import { readdir } from "node:fs/promises";
import { afterAll, afterEach, beforeAll, expect } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import type { ClusterStatus, Daemon, DaemonOptions } from "../../src/reconciler/index.js";
import {
  definitionText,
  killEnginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  revisionOf,
  spawnDaemon,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  waitWatching,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
  type DefinitionOptions,
  type LaunchTimings,
  type MonitorTimings,
  type SettingsOptions,
  type SpawnedDaemon,
  type WorldOptions,
} from "./daemon-fixture.js";

export interface DaemonWorldOptions extends WorldOptions {
  /** Settings written over the world's defaults before the daemon starts; default none (startWorld's). */
  settings?: SettingsOptions;
  /** Run after the settings, before the daemon: what else the file's world needs (a hub, a dashboard). */
  prepare?: (world: DaemonWorld) => Promise<void>;
  /**
   * "in-process" (default): a daemon in this process is started before the tests. "none": the tests
   * start their daemons themselves (`startDaemon` in this process, `spawnDaemon` as real processes).
   */
  daemon?: "in-process" | "none";
  /** The in-process daemon's resync period, ms; default 60 000 (startInProcessDaemon's). */
  resyncMs?: number;
  /** The in-process daemon's health monitor timings; default the fixture's fast ones (fastMonitor). */
  monitor?: MonitorTimings;
  /** The in-process daemon's launch deadlines over the fixture's fast ones (fastLaunch). */
  launch?: LaunchTimings;
  /** The in-process daemon's watch of the router's health URL; default the daemon's. */
  routerWatch?: DaemonOptions["routerWatch"];
  /** How long the prune of each cluster may take after the tests, ms; default 60 000. */
  pruneMs?: number;
}

/** A definition as the tests write it: the fixture's options, the ports picked free unless given. */
export type WorldDefinition = Partial<DefinitionOptions> & { nodes: string[] };

export interface DaemonWorldHandle {
  readonly world: DaemonWorld;
  /** The in-process daemon that runs now (the one started before the tests, or by `startDaemon`). */
  readonly daemon: Daemon;
  /** Start a daemon in this process with the file's resync and monitor; it becomes `daemon`. */
  startDaemon(): Promise<Daemon>;
  /** Stop the in-process daemon (its clusters keep running: they are desired state). */
  stopDaemon(): Promise<void>;
  /**
   * Start `shardctl daemon` as a real process and, unless told not to (one that must be refused),
   * wait until it watches (15 s); killed after the tests if still running.
   */
  spawnDaemon(options?: { waitWatching?: boolean; env?: Record<string, string> }): Promise<SpawnedDaemon>;
  /** A coordinator port free on 127.0.0.1 and a transport range of 8 ports free on it and every SSH node. */
  freeAddresses(): Promise<{ port: number; portRange: string }>;
  /** Write definition `name` (the ports picked free unless given) and return its revision. */
  define(name: string, definition: WorldDefinition): Promise<string>;
  /** Poll `name`'s status until Ready at `revision` with as many stages as the plan, every one alive (default deadline 45 s). */
  waitServing(name: string, revision: string, timeoutMs?: number): Promise<ClusterStatus>;
}

/** Ready at `revision`, every stage of the plan there and alive. */
export function isServingAt(status: ClusterStatus, revision: string): boolean {
  const planned = status.plan?.stages.length ?? 0;
  return isReadyAt(status, revision) && planned > 0 && status.stages.length === planned && status.stages.every((c) => c.alive);
}

/** Register the file's set-up and take-down of a daemon world; the handle the tests use. */
export function useDaemonWorld(options: DaemonWorldOptions = {}): DaemonWorldHandle {
  let world: DaemonWorld | undefined;
  let current: Daemon | undefined;
  // Whether a daemon in this process ran at all: then the clusters are pruned its way afterwards.
  let ranInProcess = false;
  const spawned: SpawnedDaemon[] = [];
  const need = (): DaemonWorld => {
    if (world === undefined) throw new Error("the daemon world is not there: its beforeAll did not run or failed");
    return world;
  };

  const handle: DaemonWorldHandle = {
    get world() {
      return need();
    },
    get daemon() {
      if (current === undefined) throw new Error("no daemon runs in this process: start one with startDaemon()");
      return current;
    },
    startDaemon: async () => {
      current = await startInProcessDaemon(
        need(),
        options.resyncMs,
        options.monitor,
        options.launch,
        options.routerWatch === undefined ? {} : { routerWatch: options.routerWatch },
      );
      ranInProcess = true;
      return current;
    },
    stopDaemon: async () => {
      const daemon = current;
      current = undefined;
      await daemon?.stop();
    },
    spawnDaemon: async ({ waitWatching: wait = true, env = {} } = {}) => {
      const daemon = await spawnDaemon(need(), env);
      spawned.push(daemon);
      if (wait) await waitWatching(daemon);
      return daemon;
    },
    freeAddresses: async () => {
      const hosts = ["127.0.0.1", ...need().hosts.values()];
      return { port: await freePort(), portRange: await freePortRange(hosts) };
    },
    define: async (name, definition) => {
      const addresses = definition.port === undefined || definition.portRange === undefined ? await handle.freeAddresses() : undefined;
      await writeDefinition(need(), name, definitionText(need(), { ...addresses, ...definition }));
      return revisionOf(need(), name);
    },
    waitServing: (name, revision, timeoutMs) => waitForStatus(need(), name, (s) => isServingAt(s, revision), timeoutMs),
  };

  beforeAll(async () => {
    world = await startWorld(options);
    if (options.settings !== undefined) await writeSettings(world, options.settings);
    await options.prepare?.(world);
    if ((options.daemon ?? "in-process") === "in-process") await handle.startDaemon();
  });

  afterEach(() => {
    if (world !== undefined) expect(world.audit.problems).toEqual([]);
  });

  afterAll(async () => {
    if (world === undefined) return;
    const pruneMs = options.pruneMs ?? 60_000;
    const late = ranInProcess ? await pruneAll(world, pruneMs, current ?? (await handle.startDaemon().catch(() => undefined))) : [];
    await handle.stopDaemon();
    for (const d of spawned) if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill("SIGKILL");
    const left = await killEnginesOf(world);
    await world.close();
    const why = late.length === 0 ? "" : ` (the prune of ${late.join(", ")} did not finish within ${pruneMs} ms)`;
    expect(left, `engine processes left after the tests${why}`).toEqual([]);
    // Each prune may take pruneMs: room for a few beyond the 120 s default.
  }, 300_000);

  return handle;
}

/**
 * Remove every definition there is and the definition of every cluster the ledger holds, and wait
 * (up to `pruneMs` each) until `daemon` has pruned it; the names whose prune did not finish in
 * time. Every definition, not only the launched ones: a cluster between two launches (a launch
 * that failed, retried with back-off) has no ledger entry at this moment but may launch during
 * the take-down. Not all at once: removing every definition would meet the mass-prune guard.
 * Without a daemon (none could start) nothing is pruned: the engines left are found and killed after.
 */
async function pruneAll(world: DaemonWorld, pruneMs: number, daemon: Daemon | undefined): Promise<string[]> {
  if (daemon === undefined) return [];
  const defined = (await readdir(world.clustersDir)).filter((f) => f.endsWith(".toml")).map((f) => f.slice(0, -".toml".length));
  const launched = (await new Ledger(world.stateDir).list().catch(() => [])).map((e) => e.cluster);
  // All but one definition at once (the guard refuses only when no definition is left and more than
  // one cluster runs), then that one: the take-downs overlap instead of queueing behind each other.
  const last = defined.at(-1);
  const first = [...new Set([...defined, ...launched])].filter((name) => name !== last);
  const late = (await Promise.all(first.map(async (name) => ((await removeDefinition(world, name, pruneMs)) ? [] : [name])))).flat();
  if (last !== undefined && !(await removeDefinition(world, last, pruneMs))) late.push(last);
  return late;
}
