/**
 * One cluster on the fault lab for a test file: `useLabCluster` registers the file's beforeAll and
 * afterAll, so the file holds its scenario only. Before the tests: a lab of namespaced stage hosts
 * with a daemon world (support/lab-world.ts) and, when asked, the cluster defined and Ready (the
 * coordinator port and transport range are picked free at the first definition, then kept). After
 * them: the cut-off host healed, the cluster pruned the daemon's way, the lab taken down, and no
 * engine and no ledger entry may be left.
 */
import { afterAll, beforeAll, expect } from "vitest";
import { Ledger, type LedgerEntry } from "../../../src/launch/index.js";
import type { ClusterStatus } from "../../../src/reconciler/index.js";
import {
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  readStatusFile,
  revisionOf,
  spawnDaemon,
  waitForStatus,
  waitWatching,
  writeDefinition,
  type DaemonWorld,
  type DefinitionOptions,
  type LaunchTimings,
  type MonitorTimings,
  type SpawnedDaemon,
} from "../../reconciler/daemon-fixture.js";
import { closeLabWorld, startLabWorld, startLabWorldWithoutDaemon } from "./lab-world.js";
import type { Lab } from "./netns.js";

/** A definition as the tests write it: the fixture's options, port and range defaulted to the file's. */
export interface LabDefinition extends Partial<DefinitionOptions> {
  /** The coordinator's bind address, in place of the fixture's 127.0.0.1 (a lab host's veth address). */
  coordinatorHost?: string;
}

export interface LabClusterOptions {
  /** Stage hosts n1…nN, each its own namespace with its own sshd. */
  hosts: number;
  /** Layers of the test model. */
  layers: number;
  /** Hidden size of the test model; default the fixture's (64). */
  hidden?: number;
  /** Launches allowed per revision. */
  restartBudget: number;
  /** `[daemon] cut_off_grace_seconds`; default the settings' (300). */
  cutOffGraceSeconds?: number;
  /** The health monitor's timings; default the production ones (poll 1000 ms, probe deadline 1000 ms, 2 strikes). */
  monitor?: MonitorTimings;
  /**
   * Launch deadlines in place of the fixture's (fastLaunch in daemon-fixture.ts), e.g. a shorter
   * stage listen deadline for a test that waits one out; in-process daemon only.
   */
  launch?: LaunchTimings;
  /**
   * "in-process" (default): the daemon runs in the test's process. "spawned": real `shardctl daemon`
   * processes the tests start (`spawnDaemon`; one is started before the definition), killed after
   * the prune.
   */
  daemon?: "in-process" | "spawned";
  /** Defined before the tests and waited for until Ready (60 s); default none: the tests define it. */
  define?: LabDefinition;
  /** The lab host (index into lab.hosts) a test may leave cut off: healed before the prune. */
  cutOff?: number;
  /** Run first after the tests (a cut of the file's own making healed). */
  beforeClose?: () => Promise<void>;
  /** How long the prune may take, ms; default 30 000. */
  pruneMs?: number;
}

export interface LabCluster {
  readonly name: string;
  readonly lab: Lab;
  readonly world: DaemonWorld;
  /** The coordinator port and the transport range of every definition, free in the root namespace when first defined (the lab hosts' are fresh). */
  readonly port: number;
  readonly portRange: string;
  /** The revision of the last definition written by `define`. */
  readonly revision: string;
  /** Write the definition (stages on n1 and n2, registered, unless said) and return its revision. */
  define(definition?: LabDefinition): Promise<string>;
  /** Ready at the last revision defined (or `revision`), Healthy, every stage alive. */
  waitForReady(timeoutMs: number, revision?: string): Promise<ClusterStatus>;
  /** The status file as it is now (it must exist). */
  status(): Promise<ClusterStatus>;
  /** Poll the status file until `predicate` holds (default deadline 45 s). */
  waitFor(predicate: (status: ClusterStatus) => boolean, timeoutMs?: number): Promise<ClusterStatus>;
  /** The cluster's ledger entry, as the daemon's own ledger reads it. */
  ledger(): Promise<LedgerEntry | undefined>;
  /** With `daemon: "spawned"`: start one more `shardctl daemon` and wait until it watches (30 s). */
  spawnDaemon(): Promise<SpawnedDaemon>;
  /** The daemon spawned last. */
  latestDaemon(): SpawnedDaemon;
}

interface State {
  lab: Lab;
  world: DaemonWorld;
  daemon: { stop(): Promise<void> };
  port: number;
  portRange: string;
  revision: string;
}

/** Register the file's set-up and take-down of cluster `name` on the lab; the handle the tests use. */
export function useLabCluster(name: string, options: LabClusterOptions): LabCluster {
  let state: Partial<State> = {};
  const need = <K extends keyof State>(key: K): State[K] => {
    const value = state[key];
    if (value === undefined) throw new Error(`the lab cluster's ${key} is not there: its beforeAll did not run or failed`);
    return value as State[K];
  };
  const cluster: LabCluster = {
    name,
    get lab() {
      return need("lab");
    },
    get world() {
      return need("world");
    },
    get port() {
      return need("port");
    },
    get portRange() {
      return need("portRange");
    },
    get revision() {
      return need("revision");
    },
    define: async (definition = {}) => {
      const { coordinatorHost, ...rest } = definition;
      const world = need("world");
      // Picked just before the first launch (other test files take ports meanwhile), then kept.
      state.port ??= await freePort();
      state.portRange ??= await freePortRange(["127.0.0.1"]);
      let text = definitionText(world, { nodes: ["n1", "n2"], port: state.port, portRange: state.portRange, register: true, ...rest });
      if (coordinatorHost !== undefined) {
        if (!text.includes('host = "127.0.0.1"')) throw new Error("the fixture's definition no longer writes the coordinator's host as 127.0.0.1");
        text = text.replace('host = "127.0.0.1"', `host = "${coordinatorHost}"`);
      }
      await writeDefinition(world, name, text);
      state.revision = await revisionOf(world, name);
      return state.revision;
    },
    waitForReady: (timeoutMs, revision) => {
      const at = revision ?? need("revision");
      return cluster.waitFor((s) => isReadyAt(s, at) && s.health === "Healthy" && s.stages.every((c) => c.alive), timeoutMs);
    },
    waitFor: (predicate, timeoutMs) => waitForStatus(need("world"), name, predicate, timeoutMs),
    status: async () => {
      const status = await readStatusFile(need("world"), name);
      if (status === undefined) throw new Error(`${name} has no status file`);
      return status;
    },
    ledger: () => new Ledger(need("world").stateDir).read(name),
    spawnDaemon: async () => {
      const daemon = await spawnDaemon(need("world"));
      spawned.push(daemon);
      await waitWatching(daemon, 30_000);
      return daemon;
    },
    latestDaemon: () => {
      const daemon = spawned.at(-1);
      if (daemon === undefined) throw new Error("no daemon was spawned");
      return daemon;
    },
  };
  const spawned: SpawnedDaemon[] = [];
  // What the prune waits for, then stops: the daemon in this process, or every spawned one still running.
  const killSpawned = async (): Promise<void> => {
    for (const d of spawned) if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill("SIGKILL");
  };

  beforeAll(async () => {
    if (options.daemon === "spawned" && options.launch !== undefined) throw new Error("launch deadlines apply to the in-process daemon only");
    const sizes = {
      layers: options.layers,
      restartBudget: options.restartBudget,
      ...(options.hidden === undefined ? {} : { hidden: options.hidden }),
      ...(options.cutOffGraceSeconds === undefined ? {} : { cutOffGraceSeconds: options.cutOffGraceSeconds }),
    };
    state =
      options.daemon === "spawned"
        ? { ...(await startLabWorldWithoutDaemon(options.hosts, sizes)), daemon: { stop: killSpawned } }
        : await startLabWorld(options.hosts, { ...sizes, monitor: options.monitor, launch: options.launch });
    if (options.daemon === "spawned") await cluster.spawnDaemon();
    if (options.define === undefined) return;
    await cluster.define(options.define);
    await cluster.waitForReady(60_000);
  }, 120_000);

  afterAll(async () => {
    await options.beforeClose?.().catch(() => undefined);
    const { lab, world, daemon } = state;
    const cutOff = options.cutOff === undefined ? undefined : lab?.hosts[options.cutOff];
    const left = await closeLabWorld({ lab, world, daemon }, name, { cutOff, pruneMs: options.pruneMs });
    expect(left.engines, "engine processes left after the prune").toEqual([]);
    expect(left.ledger, "ledger entries left after the prune").toEqual([]);
  }, 60_000);

  return cluster;
}
