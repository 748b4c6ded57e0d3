/**
 * What the steps of a pass work with besides the cluster itself: the node pool, the router
 * registrar, the definitions directory this daemon owns, the log, and the status writer. One per
 * daemon; the registrar is rebuilt only when the router settings change.
 */
import { NodeMemoryClaims } from "./node-memory.js";
import { existsSync } from "node:fs";
import { hostname } from "node:os";
import { join } from "node:path";
import type { Logger } from "pino";
import { nodeConfigNamed, nodesOfCluster, type ClusterNodes } from "../cluster/index.js";
import { ShardctlError, messageOf } from "../errors/index.js";
import { Ledger, type LaunchDeadlines, type LedgerEntry, type RunClaim, type TeardownContext, type TimelineEvent } from "../launch/index.js";
import type { NodeAccess, NodePool } from "../nodes/index.js";
import { createRegistrar, reloadingAfterEdits, type Registrar, type RouterAnswer } from "../router/index.js";
import type { ClusterSpec, Settings } from "../spec/index.js";
import type { ClusterMemory } from "./cluster-memory.js";
import { NodePlaces } from "./queue/node-places.js";
import { composeStatus, type PassReport } from "./compose-status.js";
import { isOwnedBy } from "./decision-inputs.js";
import { renderStatus, statusFileFor, writeStatus, type ClusterStatus } from "./status/index.js";
import { readRegularText } from "../files/index.js";
import type { StatusFeed } from "./status-feed.js";
import { recordEvent } from "./verdicts.js";

/**
 * Health monitor tuning. Defaults: poll every 1000 ms, 2 strikes, probe deadline 1000 ms, exit
 * watches on, the engine's own generation watchdog (tests shorten them).
 */
export type MonitorTuning = {
  pollIntervalMs?: number;
  strikes?: number;
  exitWatch?: boolean;
  probeTimeoutMs?: number;
  slowPathTimeoutMs?: number;
  generationWatchdog?: { intervalMs: number; timeoutMs: number };
};

export interface WorldOptions {
  /** The watched directory of definitions (absolute). */
  dir: string;
  pool: NodePool;
  log: Logger;
  /** Ask for another pass of a cluster (the daemon's work queue). */
  requeue: (name: string) => void;
  /** Awaited after each edit of the router's config: the embedded router reloads it at once. */
  afterRouterEdit?: () => Promise<unknown>;
  launchDeadlines?: Partial<LaunchDeadlines>;
  monitor?: MonitorTuning;
  /** Where every composed status is also published (the dashboard's live stream). */
  feed?: StatusFeed;
  /** Whether the router answers, as the daemon's watch last judged; undefined (or absent) when it is not watched. */
  routerAnswer?: () => RouterAnswer | undefined;
  /** The daemon's id (see daemon-id.ts), which its run-folder claims carry. */
  daemonId?: string;
}

/** Least time between two progress writes of one cluster's status (staging bytes), ms. */
const progressIntervalMs = 500;
/** The most of a status file a restore reads to compare, bytes: far above any the daemon writes. */
const maxStatusBytes = 8 << 20;
/**
 * How long after a failed status write (a full disk, a directory in the file's place) the
 * cluster's latest status is written again, ms: readers are not left with an old word until the
 * next pass once the cause is gone. Doubled after each failure in a row, up to statusRetryMaxMs.
 */
const statusRetryMs = 5_000;
const statusRetryMaxMs = 60_000;

export class ReconcilerWorld {
  private registrarCache: { key: string; registrar: Registrar } | undefined;
  /** The write in flight per cluster: writes land in the order they were composed. */
  private readonly writes = new Map<string, Promise<void>>();
  private readonly lastProgress = new Map<string, number>();
  /** The text of the status file this daemon last wrote (or found saying it), per cluster. */
  private readonly lastWritten = new Map<string, string>();
  /** A progress write held back to the end of its 500 ms, per cluster. */
  private readonly pendingProgress = new Map<string, NodeJS.Timeout>();
  /**
   * Per cluster whose status writes fail: the next try (see statusRetryMs), while one is due, and
   * the wait before the try after it, ms (doubling to statusRetryMaxMs). Gone once a write succeeds.
   */
  private readonly retries = new Map<string, { timer?: NodeJS.Timeout; nextDelayMs: number }>();
  /** The daemon stops: no write is tried again after it. */
  private writesDropped = false;
  /** The Ready condition each cluster's status file says, as last written (status, reason, message). */
  private readonly readyWritten = new Map<string, string>();
  /** Transfers under way at once on each node: four (see NodePlaces). */
  readonly stagingPlaces = new NodePlaces();
  /** What each cluster's launch holds of its nodes' declared memory (see node-memory.ts). */
  readonly memoryClaims = new NodeMemoryClaims();
  /**
   * Router backend names taken by launches under way, by cluster: a launch records its backend in
   * the ledger only once registered, so two launching at once under one name would both see it free.
   */
  readonly launchingBackends = new Map<string, string>();
  /** Clusters whose status file this daemon has written (or touched) since it started. */
  private readonly spoken = new Set<string>();

  constructor(readonly options: WorldOptions) {}

  get dir(): string {
    return this.options.dir;
  }

  get log(): Logger {
    return this.options.log;
  }

  definitionFile(name: string): string {
    return join(this.options.dir, `${name}.toml`);
  }

  /** Launched from this daemon's directory (entries from before owners were recorded count as ours). */
  owns(entry: Pick<LedgerEntry, "owner">): boolean {
    return isOwnedBy(entry, this.options.dir);
  }

  /** This daemon as its launches claim run folders on the nodes: its id (or, without one, its host and state directory) tells it apart from another. */
  claimant(settings: Settings): RunClaim {
    return {
      ...(this.options.daemonId === undefined ? {} : { id: this.options.daemonId }),
      host: hostname(),
      stateDir: settings.daemon.stateDir,
      definitions: this.options.dir,
    };
  }

  async ownEntries(settings: Settings): Promise<LedgerEntry[]> {
    return (await new Ledger(settings.daemon.stateDir).list()).filter((e) => this.owns(e));
  }

  nodesOf(spec: ClusterSpec, settings: Settings): ClusterNodes {
    return nodesOfCluster(spec, settings, this.options.pool);
  }

  /** A node named in the ledger: a registry node or the control machine. */
  nodeFor(name: string, settings: Settings): NodeAccess {
    const config = nodeConfigNamed(name, settings);
    if (config === undefined)
      throw new ShardctlError("NodeUnregistered", `node "${name}" recorded in the ledger is no longer in ${settings.file}; add it back to clean up what runs there`);
    return this.options.pool.get(config);
  }

  /** Whether the router answers now (see watchRouterAnswers); undefined when it is not watched. */
  routerAnswer(): RouterAnswer | undefined {
    return this.options.routerAnswer?.();
  }

  /** A launch of `cluster` lost a process (once per launch): for the metrics' count of deaths. */
  noteDeath(cluster: string, reason: string): void {
    this.options.feed?.deathRecorded(cluster, reason);
  }

  registrarFor(settings: Settings): Registrar {
    const key = JSON.stringify(settings.router);
    if (this.registrarCache?.key !== key) {
      const registrar = createRegistrar(settings.router);
      const reload = this.options.afterRouterEdit;
      this.registrarCache = { key, registrar: reload === undefined ? registrar : reloadingAfterEdits(registrar, reload) };
    }
    return this.registrarCache.registrar;
  }

  /** How teardown reaches the nodes and the router; its events go to the cluster's timeline. */
  teardownContext(settings: Settings, ledger: Ledger, memory: ClusterMemory): TeardownContext {
    return {
      ledger,
      registrar: this.registrarFor(settings),
      nodeFor: (n: string) => this.nodeFor(n, settings),
      graceMs: this.options.launchDeadlines?.stopGraceMs ?? 5_000,
      claimant: this.claimant(settings),
      onEvent: (event) => {
        recordEvent(memory, event);
        this.noteEvent(memory.name, event);
      },
    };
  }

  /** An engine's log emptied past its limit (its end kept beside it), said in the daemon's log. */
  noteLogTrimmed(cluster: string, node: string, file: string, bytes: number): void {
    this.log.warn({ cluster, node, file, bytes }, "an engine's log passed its limit: its end is kept beside it (<log>.1) and it starts again empty");
  }

  /**
   * The timeline events an operator must hear of, said in the daemon's log too: the timeline that
   * records them is replaced by the next launch's, or removed with the status. A process that
   * outlived its stop grace period (SIGTERM) and was SIGKILLed; one that listens on every
   * interface of its node rather than the address it was given; a run folder on a full file system.
   */
  noteEvent(cluster: string, event: TimelineEvent): void {
    if (event.step.endsWith("-killing")) this.log.warn({ cluster, detail: event.detail }, "a process did not stop within its grace period after SIGTERM: SIGKILLed");
    if (event.step === "listening-wider") this.log.warn({ cluster, detail: event.detail }, "a process of the launch listens on every interface of its node");
    if (event.step === "run-folder-full") this.log.warn({ cluster, detail: event.detail }, "a run folder of the launch is on a full file system");
  }

  /**
   * Compose and write the status file (only when its content changed); a failed write is logged,
   * never thrown. The status is published to the feed at once; writes of one cluster are queued
   * so that an older status (a death seen mid-pass, staging progress) never lands after a newer one.
   */
  async writeStatus(name: string, memory: ClusterMemory, report: PassReport, settings: Settings | undefined, progress = false): Promise<void> {
    // A status that is no progress report supersedes a progress write still held back.
    if (!progress) this.cancelProgress(name);
    const file = this.definitionFile(name);
    const status = composeStatus(name, file, memory, report, settings);
    memory.status = status;
    this.options.feed?.publish(status);
    await this.queueWrite(name, memory, () => status);
  }

  /** Write `status` as it is (a status file kept but for a few words), as the cluster's last composed one. */
  async writeKeptStatus(name: string, memory: ClusterMemory, status: ClusterStatus): Promise<void> {
    this.cancelProgress(name);
    memory.status = status;
    this.options.feed?.publish(status);
    await this.queueWrite(name, memory, () => status);
  }

  /**
   * Put the status file back as last composed when it disappeared or changed behind the daemon's
   * back (a `git clean`, a checkout of an old one, a stray edit): readers must not be left with no
   * word, or a stale one, until the next pass. The daemon's own writes come here too and find the
   * file as written, which costs one read.
   */
  async restoreStatus(name: string, memory: ClusterMemory): Promise<void> {
    await this.queueWrite(name, memory, () => memory.status, true);
  }

  /**
   * Write after the cluster's write in flight, so writes land in the order they were composed. A
   * restore reads the status when its turn comes: one composed meanwhile is not written over. A
   * write that fails is tried again, with the cluster's latest status, until one succeeds.
   */
  private async queueWrite(name: string, memory: ClusterMemory, statusNow: () => ClusterStatus | undefined, restore = false): Promise<void> {
    const file = this.definitionFile(name);
    const write = (this.writes.get(name) ?? Promise.resolve()).then(async () => {
      const status = statusNow();
      if (status === undefined) return;
      try {
        // A file that still says what this daemon last wrote was changed by nobody else: a status
        // composed since (its write queued, or a progress write held back) is no one else's edit.
        if (
          restore &&
          (await readRegularText(statusFileFor(file), { maxBytes: maxStatusBytes, what: "status file" }).catch(() => undefined)) === this.lastWritten.get(name)
        )
          return;
        // This daemon's first word on the cluster is dated now even when it says what the file
        // said: `wait` trusts a status only when written since the daemon that runs started.
        const written = await writeStatus(statusFileFor(file), status, { touch: !this.spoken.has(name) });
        this.lastWritten.set(name, renderStatus(status));
        this.spoken.add(name);
        if (written && restore)
          this.options.log.info({ cluster: name, file: statusFileFor(file) }, "the status file was removed or written by someone else: the daemon's own is back");
        this.cancelRetry(name);
        this.options.feed?.fileWritten(name, undefined);
        this.logReadyChange(name, status);
      } catch (error) {
        this.options.log.error({ cluster: name, err: error }, "could not write the status file");
        const message = `could not write ${statusFileFor(file)}: ${messageOf(error)}`;
        this.options.feed?.fileWritten(name, { reason: "StatusWriteFailed", message, at: new Date().toISOString() });
        this.retryWrite(name, memory);
      }
    });
    this.writes.set(name, write);
    await write;
    if (this.writes.get(name) === write) this.writes.delete(name);
  }

  /**
   * Log each change of the Ready condition the status file says, once written: the file holds only
   * the latest word, and a fault's words can be replaced within milliseconds (the death, then its
   * exit status, then the relaunch); the log keeps each, in the order the file said them.
   */
  private logReadyChange(name: string, status: ClusterStatus): void {
    const ready = status.conditions.find((c) => c.type === "Ready");
    if (ready === undefined) return;
    const key = `${ready.status}\u0000${ready.reason}\u0000${ready.message}`;
    if (this.readyWritten.get(name) === key) return;
    this.readyWritten.set(name, key);
    this.options.log.info({ cluster: name, ready: { status: ready.status, reason: ready.reason, message: ready.message } }, "the status file's Ready changed");
  }

  /** Forget what was kept of a cluster whose definition is gone (its status file with it). */
  forget(name: string): void {
    this.memoryClaims.release(name);
    this.readyWritten.delete(name);
    this.lastProgress.delete(name);
    this.lastWritten.delete(name);
    this.cancelProgress(name);
    this.cancelRetry(name);
  }

  /** Drop every write still held back, progress or retry (the daemon stops: nothing is written after it). */
  dropHeldWrites(): void {
    this.writesDropped = true;
    for (const name of [...this.pendingProgress.keys()]) this.cancelProgress(name);
    for (const name of [...this.retries.keys()]) this.cancelRetry(name);
  }

  /** Write the cluster's latest status again after the back-off, unless a try is already due or the daemon stops. */
  private retryWrite(name: string, memory: ClusterMemory): void {
    const retry = this.retries.get(name) ?? { nextDelayMs: statusRetryMs };
    if (retry.timer !== undefined || this.writesDropped) return;
    const delay = retry.nextDelayMs;
    retry.nextDelayMs = Math.min(delay * 2, statusRetryMaxMs);
    retry.timer = setTimeout(() => {
      retry.timer = undefined;
      // A definition removed meanwhile takes its status file with it: none is written back.
      void this.queueWrite(name, memory, () => (existsSync(this.definitionFile(name)) && !this.writesDropped ? memory.status : undefined));
    }, delay);
    retry.timer.unref();
    this.retries.set(name, retry);
  }

  /** Forget a cluster's retry: its next try and its back-off. */
  private cancelRetry(name: string): void {
    clearTimeout(this.retries.get(name)?.timer);
    this.retries.delete(name);
  }

  private cancelProgress(name: string): void {
    clearTimeout(this.pendingProgress.get(name));
    this.pendingProgress.delete(name);
  }

  /**
   * Progress of a long step (staging bytes): written like any status, at most every 500 ms per
   * cluster, and the last word of a burst once its 500 ms are over: a node that finished, or began to
   * wait for another process's lock, right after another node's event is not left unsaid while
   * nothing else moves. Any other status written meanwhile supersedes it.
   */
  writeProgress(name: string, memory: ClusterMemory, report: PassReport, settings: Settings | undefined): void {
    const since = performance.now() - (this.lastProgress.get(name) ?? Number.NEGATIVE_INFINITY);
    if (since >= progressIntervalMs) {
      this.lastProgress.set(name, performance.now());
      void this.writeStatus(name, memory, report, settings);
      return;
    }
    if (this.pendingProgress.has(name)) return;
    const timer = setTimeout(() => {
      this.pendingProgress.delete(name);
      this.lastProgress.set(name, performance.now());
      void this.writeStatus(name, memory, report, settings, true);
    }, progressIntervalMs - since);
    timer.unref();
    this.pendingProgress.set(name, timer);
  }
}
