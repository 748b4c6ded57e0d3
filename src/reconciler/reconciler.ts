/**
 * The reconciler: one pass of one cluster at a time (the work queue guarantees it), level-triggered.
 * The key is all a pass is given; it re-reads the settings and the definition, re-observes what
 * runs and takes the next action (converge.ts tells the story). Status is written after every
 * pass, whatever happened. Failures come in two kinds, kept apart: terminal (stall until the file
 * changes) and transient (retry with back-off). An expected wait — a launch coming up, a relaunch —
 * needs no timer: the health monitor watching it asks for the next pass when something changes.
 */
import { pathExists } from "../files/index.js";
import { readdir, stat } from "node:fs/promises";
import { basename } from "node:path";
import type { Logger } from "pino";
import { isShardctlError, messageOf } from "../errors/index.js";
import { Ledger, teardownCluster, type LaunchDeadlines } from "../launch/index.js";
import { sshClientFiles, sshConfigFiles, type NodeAccess, type NodePool } from "../nodes/index.js";
import { findClusterFiles, type Settings } from "../spec/index.js";
import { sshOptionsOf } from "../cluster/index.js";
import { createMemory, type ClusterMemory } from "./cluster-memory.js";
import type { PassReport } from "./compose-status.js";
import { createConverge, type Converge } from "./converge.js";
import { ReturningNodes, whatToWatch, type NodeWatch } from "./returning-nodes/index.js";
import { ParseCache } from "./parse-cache.js";
import type { Pass } from "./pass.js";
import type { PassOutcome } from "./queue/work-queue.js";
import { StepFailure } from "./run-step.js";
import { readStatus, statusFileFor } from "./status/index.js";
import { summarizePass } from "./summarize-pass.js";
import { keepComingBack } from "./coming-back.js";
import { clearRuntime, deathHealth, failed, isServing, setConditions, settle, type Verdict } from "./verdicts.js";
import { ReconcilerWorld, type MonitorTuning } from "./world.js";
import { StatusFeed } from "./status-feed.js";
import type { RouterAnswer } from "../router/index.js";

export interface ReconcilerOptions {
  /** The watched directory of definitions (absolute). */
  dir: string;
  settingsFile: string;
  pool: NodePool;
  log: Logger;
  /** Ask for another pass of a cluster (the daemon's work queue). */
  requeue: (name: string) => void;
  /** Awaited after each edit of the router's config: the embedded router reloads it at once. */
  afterRouterEdit?: () => Promise<unknown>;
  launchDeadlines?: Partial<LaunchDeadlines>;
  monitor?: MonitorTuning;
  /** Called after every pass, for metrics. */
  onPass?: (name: string, report: PassReport, durationMs: number) => void;
  /** The state directory the daemon started with: kept while it runs, whatever the settings file says later. */
  stateDir?: string;
  /** The daemon's id, which its run-folder claims carry (see daemon-id.ts). */
  daemonId?: string;
  /** Whether the router answers, as the daemon's watch last judged; undefined when it is not watched. */
  routerAnswer?: () => RouterAnswer | undefined;
}

/** Reasons of a failure on something another cluster held: see clustersWaitingOnOthers. */
const waitsOnOthers: ReadonlySet<string> = new Set(["PortInUse", "PortRangeExhausted", "RouterBackendTaken", "NodeMemoryTaken"]);

export class Reconciler {
  private readonly memories = new Map<string, ClusterMemory>();
  private readonly parsed: ParseCache;
  private readonly world: ReconcilerWorld;
  private readonly converge: Converge;
  private readonly returning: ReturningNodes;
  private settingsStamp: string | undefined;
  /** Aborted by callOffLaunches: the daemon is stopping. */
  private readonly stopping = new AbortController();
  /** Every status this reconciler composes, as it is composed (the dashboard's live stream). */
  readonly feed = new StatusFeed();

  constructor(private readonly options: ReconcilerOptions) {
    const stateDir = options.stateDir;
    this.parsed = new ParseCache(
      stateDir === undefined
        ? undefined
        : {
            stateDir,
            moved: (asked) =>
              options.log.warn(
                { stateDir, asked, settings: options.settingsFile },
                "[daemon] state_dir changed in the settings file while the daemon runs: it keeps the state directory it started with (its ledger, requests and health monitors are there) until it is restarted; restart it to move, after moving that directory's contents (the ledger of what runs) to the new one",
              ),
          },
    );
    this.world = new ReconcilerWorld({ ...options, feed: this.feed });
    this.converge = createConverge({
      parsed: this.parsed,
      forget: (name) => this.memories.delete(name),
      promiseBack: (name, model) => {
        const memory = this.memories.get(name);
        if (memory !== undefined) memory.comingBack = model;
      },
      stopping: this.stopping.signal,
      settingsNow: () => this.parsed.loadSettings(this.options.settingsFile),
    });
    this.returning = new ReturningNodes({
      requeue: options.requeue,
      ...(options.monitor?.pollIntervalMs === undefined ? {} : { pollMs: options.monitor.pollIntervalMs }),
    });
  }

  /**
   * Withdraw the router's stalled marks: this daemon's first passes set again those of clusters
   * still stalled, so a mark left by an earlier daemon for a cluster since removed goes.
   */
  async clearStalledMarks(settings: Settings): Promise<void> {
    await this.world
      .registrarFor(settings)
      .clearAllStalled()
      .catch((error: unknown) => this.options.log.warn({ err: error }, "could not withdraw the router's stalled marks"));
  }

  /**
   * Takes back what the router applied after this daemon withdrew it (a registration an admin API
   * applied past its deadline, after the launch's rollback or the cluster's teardown): otherwise a
   * removed cluster's model would stay routed to nothing for good. Run at each periodic resync.
   */
  async sweepRouter(): Promise<void> {
    const settings = await this.parsed.loadSettings(this.options.settingsFile).catch(() => undefined);
    if (settings === undefined) return;
    const registrar = this.world.registrarFor(settings);
    if (registrar.sweep === undefined) return;
    try {
      for (const entry of await registrar.sweep()) {
        this.options.log.warn(
          { backend: entry.name, url: entry.url },
          "the router applied a registration after this daemon withdrew it (an admin API that answered after its deadline): took it back",
        );
      }
    } catch (error) {
      this.options.log.warn({ err: messageOf(error) }, "could not look for registrations the router applied late; looked for again at the next resync");
    }
  }

  /**
   * What the launches this daemon finds in the ledger hold of their nodes' declared memory, as each
   * recorded it, counted before the first pass: a cluster that runs and is not adopted yet (its
   * pass waits on its nodes) must not be launched over.
   */
  async holdRecordedMemory(settings: Settings): Promise<void> {
    const entries = await this.world.ownEntries(settings).catch(() => []);
    for (const entry of entries) {
      if (entry.phase === "tearing-down" || entry.memoryBytes === undefined) continue;
      this.world.memoryClaims.holdRecorded(entry.cluster, entry.memoryBytes);
    }
  }

  /** One pass of `name`; the queue's outcome says whether and when to come back. */
  async reconcile(name: string, stepAside?: () => void): Promise<PassOutcome> {
    const startedAt = Date.now();
    // The pass's length by the monotonic clock: a wall clock stepped back meanwhile (NTP) must not
    // make it negative, which the status file's schema refuses (every later write would fail).
    const startedMs = performance.now();
    const memory = await this.memoryOf(name);
    const file = this.world.definitionFile(name);
    let verdict: Verdict;
    let settings: Settings | undefined;
    let pass: Pass | undefined;
    let keeper: ReturnType<typeof keepComingBack> | undefined;
    try {
      settings = await this.parsed.loadSettings(this.options.settingsFile);
      pass = {
        name,
        file,
        settings,
        ledger: new Ledger(settings.daemon.stateDir),
        memory,
        world: this.world,
        startedAt,
        steps: [],
        ...(stepAside === undefined ? {} : { stepAside }),
      };
      keeper = keepComingBack(pass);
      verdict = await this.converge(pass);
    } catch (error) {
      const cause = error instanceof StepFailure ? error.cause : error;
      if (!isShardctlError(cause)) this.options.log.error({ cluster: name, err: cause }, "reconcile pass failed unexpectedly");
      verdict = failed(memory, error, error instanceof StepFailure ? error.step.action : "none");
    }
    const durationMs = Math.round(performance.now() - startedMs);
    memory.fileStamp = await stampOf(file);
    // A death the monitor recorded after the pass's last step (this await, the step's own) is the
    // last word on the launch the pass kept: its health is not written over with the pass's.
    const kept = pass?.launched ?? pass?.entry;
    if (kept !== undefined && memory.deathRecordedFor === kept.startedAt && (verdict.health === "Healthy" || verdict.health === "Degraded")) {
      verdict = { ...verdict, result: "waiting", health: deathHealth(memory), ...(memory.lastError === undefined ? {} : { reason: memory.lastError.reason }) };
    }
    // The router's marks follow the pass's last word (a death recorded at its end included).
    await keeper?.end(verdict);
    // One that waits for another folder (ClusterOwnedElsewhere: it may be moved away) hears of it by no file event here.
    memory.settled =
      (verdict.outcome.kind === "done" || verdict.outcome.kind === "stall") && memory.supervision === undefined && verdict.reason !== "ClusterOwnedElsewhere";
    const repeated = repeatsLastPass(memory.history, verdict);
    // The log folds a repeat only when it also says the same: another invalid edit is a new line.
    const said = verdict.result === "failed" || verdict.result === "stalled" ? memory.lastError?.message : undefined;
    const quiet = repeated && said === memory.lastLoggedError;
    memory.lastLoggedError = said;
    if (!repeated) {
      memory.history = [
        ...memory.history,
        { at: new Date(startedAt).toISOString(), action: verdict.action, result: verdict.result, ...(verdict.reason ? { reason: verdict.reason } : {}), durationMs },
      ].slice(-5);
    }
    if (verdict.pruned !== true) await this.world.writeStatus(name, memory, verdict, settings);
    else {
      this.feed.remove(name);
      this.world.forget(name);
    }
    this.returning.follow(
      name,
      pass === undefined ? undefined : await this.leftToWatch(pass, verdict.result === "failed" && memory.lastError?.reason === "NodeUnreachable"),
    );
    summarizePass(this.options.log, name, memory, verdict, durationMs, pass?.steps ?? [], quiet);
    this.options.onPass?.(name, verdict, durationMs);
    return verdict.outcome;
  }

  /**
   * Names of clusters the daemon knows of: definitions plus anything remembered or in the ledger,
   * and status files left without their definition (removed while no daemon ran: the pass that
   * finds nothing running forgets them).
   */
  /** The settings file as it reads now (the same object while its text is unchanged). */
  settingsNow(): Promise<Settings> {
    return this.parsed.loadSettings(this.options.settingsFile);
  }

  async knownClusters(): Promise<string[]> {
    // Everything is looked at now: a resync only needs to notice settings changes after this.
    const settings = await this.parsed.loadSettings(this.options.settingsFile).catch(() => undefined);
    this.settingsStamp = await stampOfSettings(this.options.settingsFile, settings);
    const files = await findClusterFiles(this.options.dir).catch(() => []);
    const defined = files.map((f) => basename(f, ".toml"));
    // A status file whose definition is spelled with other letter case is no ghost: on a file
    // system that ignores case, its pass would read that definition under the status file's name.
    const ghosts = (await statusFileNames(this.options.dir)).filter((name) => !defined.some((d) => d.toLowerCase() === name));
    const names = new Set([...defined, ...ghosts]);
    for (const name of this.memories.keys()) names.add(name);
    if (settings !== undefined) for (const entry of await this.world.ownEntries(settings)) names.add(entry.cluster);
    return [...names].sort();
  }

  /**
   * The clusters a periodic resync looks at again: whatever has something in the ledger (processes
   * can die or drift behind our back), whatever has not settled, and definitions whose file changed
   * without an event reaching us (or appeared or disappeared). A settled cluster with nothing
   * running and an unchanged file cannot drift, so an idle daemon with many stopped definitions
   * stays idle.
   */
  async resyncCandidates(): Promise<string[]> {
    const settings = await this.parsed.loadSettings(this.options.settingsFile).catch(() => undefined);
    if (settings === undefined || (await stampOfSettings(this.options.settingsFile, settings)) !== this.settingsStamp) return this.knownClusters();
    const files = await findClusterFiles(this.options.dir).catch(() => [] as string[]);
    // A ledger that cannot be listed (its folder replaced, out of descriptors) is no reason to stop
    // looking: every known cluster gets its pass, which says what its own record says.
    const entries = await this.world.ownEntries(settings).catch((error: unknown) => {
      this.options.log.warn({ err: messageOf(error) }, "could not list the ledger for the periodic resync: every known cluster is looked at again");
      return undefined;
    });
    if (entries === undefined) return this.knownClusters();
    const running = new Set(entries.map((e) => e.cluster));
    const names = new Set<string>([...running, ...[...this.memories.keys()].filter((n) => !files.some((f) => basename(f, ".toml") === n))]);
    await Promise.all(
      files.map(async (file) => {
        const name = basename(file, ".toml");
        const memory = this.memories.get(name);
        if (memory === undefined || memory.settled !== true || memory.fileStamp !== (await stampOf(file))) names.add(name);
      }),
    );
    return [...names].sort();
  }

  /**
   * Clusters other than `except` whose last pass failed on something another cluster held (a port,
   * a transport port range, a router backend name, a node's memory): a teardown or a new launch may
   * have let it go, so their next pass need not wait out its back-off (up to a minute).
   */
  clustersWaitingOnOthers(except: string): string[] {
    return [...this.memories].filter(([name, memory]) => name !== except && waitsOnOthers.has(memory.lastError?.reason ?? "")).map(([name]) => name);
  }

  /**
   * The status file of `name` changed or disappeared: put back what the daemon last wrote, if it
   * keeps one for a definition that still exists (a pruned cluster's file is removed on purpose).
   */
  async restoreStatus(name: string): Promise<void> {
    const memory = this.memories.get(name);
    if (memory?.status === undefined || !(await pathExists(this.world.definitionFile(name)))) return;
    await this.world.restoreStatus(name, memory);
  }

  /** Ask the next pass of `name` to forget its restart budget (`shardctl reconcile`). */
  async requestRetry(name: string): Promise<void> {
    const memory = await this.memoryOf(name);
    memory.retryRequested = true;
    // Said in the status file before the request is acknowledged, so `shardctl reconcile && shardctl
    // wait` never reads the Stalled that the request just lifted.
    if (!(await pathExists(this.world.definitionFile(name)))) return;
    // A request this daemon finds as it starts (queued while none ran) comes before its first pass
    // of the cluster: its memory holds only what the status file said, so that file is kept as it
    // is but for the words below, rather than composed again from a memory that knows no stages.
    const unpassed = memory.fileStamp === undefined ? memory.status : undefined;
    const revision = memory.lastGood?.revision ?? unpassed?.observedRevision ?? "";
    const message = "`shardctl reconcile` asked for a pass with a fresh restart budget";
    setConditions(memory, revision, {
      Stalled: { status: "False", reason: "RetryRequested", message },
      Reconciling: { status: "True", reason: "RetryRequested", message },
    });
    const settings = await this.parsed.loadSettings(this.options.settingsFile).catch(() => undefined);
    // The request lifts a stall and nothing else: a cluster Degraded (a node it cannot see) or
    // Unhealthy stays so until the pass it asks for says otherwise.
    const last = memory.status?.health;
    const health = last !== undefined && last !== "Stalled" ? last : isServing(memory) ? "Healthy" : "Progressing";
    if (unpassed !== undefined) await this.world.writeKeptStatus(name, memory, { ...unpassed, conditions: memory.conditions, health });
    else await this.world.writeStatus(name, memory, { action: "none", result: "waiting", health }, settings);
  }

  /**
   * The daemon stops: launches in progress are called off (a staging cut, its partial files kept),
   * so their passes end within seconds instead of when the staging would have.
   */
  callOffLaunches(): void {
    this.stopping.abort();
  }

  /** Stop supervising every cluster, leaving them running (they are desired state), and stop watching leftovers. */
  async detachAll(): Promise<void> {
    await Promise.all([...this.memories.values()].map((m) => m.supervision?.supervision.stop()));
    this.returning.stopAll();
    this.world.dropHeldWrites();
  }

  /** Each node the pass's definition uses (stages and coordinator) once; none when it names one the settings lack. */
  private nodesUsedBy(pass: Pass): NodeAccess[] {
    if (pass.spec === undefined) return [];
    try {
      const { stages, coordinator } = this.world.nodesOf(pass.spec, pass.settings);
      return [...new Map([...stages, coordinator].map((n) => [n.config.name, n])).values()];
    } catch {
      return [];
    }
  }

  /**
   * What a pass leaves to watch for a node's return: the nodes of leftovers its teardown could not
   * reach (they stay in the ledger until a pass reaches them) and, when it failed for want of a
   * node's answer, the nodes its definition uses. Read after every pass, which may have left
   * leftovers, stopped them, or forgotten the cluster.
   */
  private async leftToWatch(pass: Pass, failedUnreachable: boolean): Promise<NodeWatch | undefined> {
    const entry = await pass.ledger.read(pass.name).catch(() => undefined);
    return whatToWatch({
      entry: entry !== undefined && this.world.owns(entry) ? entry : undefined,
      failedUnreachable,
      nodesUsed: failedUnreachable ? this.nodesUsedBy(pass) : [],
      nodeFor: (node) => this.world.nodeFor(node, pass.settings),
      nodeSettings: (node) => pass.settings.nodes[node],
    });
  }

  /**
   * Tear down everything this daemon started (the demo's --teardown-on-exit), every cluster at
   * once: each status file withdraws Ready before its teardown begins (a teardown can wait out an
   * unreachable node) and says how it ended. A teardown that fails does not keep the others from
   * theirs; the first failure is thrown once all have ended.
   */
  async teardownAll(): Promise<void> {
    const settings = await this.parsed.loadSettings(this.options.settingsFile);
    const ledger = new Ledger(settings.daemon.stateDir);
    await this.detachAll();
    const entries = await this.world.ownEntries(settings);
    const results = await Promise.allSettled(
      entries.map(async (entry) => {
        const memory = this.memoryOfSync(entry.cluster);
        const revision = memory.lastGood?.revision ?? entry.revision;
        const described = await pathExists(this.world.definitionFile(entry.cluster));
        if (described) {
          const message = "the daemon is tearing the cluster down as it exits (--teardown-on-exit)";
          setConditions(memory, revision, {
            Ready: { status: "False", reason: "TearingDown", message },
            Reconciling: { status: "True", reason: "TearingDown", message },
          });
          await this.world.writeStatus(entry.cluster, memory, { action: "stop", result: "waiting", reason: "TearingDown", health: "Progressing" }, settings);
        }
        try {
          await teardownCluster(entry, this.world.teardownContext(settings, ledger, memory));
        } catch (error) {
          if (described) {
            const reason = isShardctlError(error) ? error.reason : "TeardownFailed";
            const message = `${messageOf(error)}; the daemon exited with the teardown unfinished: the next daemon started on this directory finishes it`;
            memory.lastError = { reason, message, at: new Date().toISOString() };
            setConditions(memory, revision, {
              Ready: { status: "False", reason, message },
              Reconciling: { status: "False", reason, message },
            });
            await this.world.writeStatus(entry.cluster, memory, { action: "stop", result: "failed", reason, health: "Unhealthy" }, settings);
          }
          throw error;
        }
        // Say so in the status file: a stale Ready must not outlive the processes.
        if (described) {
          // A stop asked for, not a failure: the next start's launch does not count against this run's budget.
          if (memory.restarts !== undefined) memory.restarts.count = 0;
          const verdict = settle(memory, "stop", "Stopped", "TornDownOnExit", "the daemon tore the cluster down as it exited (--teardown-on-exit)");
          clearRuntime(memory, revision);
          await this.world.writeStatus(entry.cluster, memory, verdict, settings);
        }
      }),
    );
    // Clusters with nothing running (a launch that failed, waiting for its retry): their files
    // must not go on saying the daemon is at work on them.
    const torn = new Set(entries.map((e) => e.cluster));
    for (const [name, memory] of this.memories) {
      if (torn.has(name) || !(await pathExists(this.world.definitionFile(name)))) continue;
      if (memory.status?.health === "Stopped" || memory.status?.health === "Suspended" || memory.status?.health === "Disabled") continue;
      const message = "the daemon exited (--teardown-on-exit); nothing of the cluster runs";
      setConditions(memory, memory.lastGood?.revision ?? "", {
        Ready: { status: "False", reason: "TornDownOnExit", message },
        Reconciling: { status: "False", reason: "TornDownOnExit", message },
      });
      clearRuntime(memory, memory.lastGood?.revision ?? "");
      await this.world.writeStatus(name, memory, { action: "none", result: "success", reason: "TornDownOnExit", health: "Stopped" }, settings);
    }
    const failure = results.find((r): r is PromiseRejectedResult => r.status === "rejected");
    if (failure !== undefined) throw failure.reason;
  }

  private async memoryOf(name: string): Promise<ClusterMemory> {
    const existing = this.memories.get(name);
    if (existing !== undefined) return existing;
    const previous = await readStatus(statusFileFor(this.world.definitionFile(name))).catch(() => undefined);
    const memory = createMemory(name, previous);
    this.memories.set(name, memory);
    return memory;
  }

  private memoryOfSync(name: string): ClusterMemory {
    let memory = this.memories.get(name);
    if (memory === undefined) {
      memory = createMemory(name);
      this.memories.set(name, memory);
    }
    return memory;
  }
}

/**
 * A pass that changed nothing (action none or plan, or a stall) and ended like the last recorded
 * one is not recorded again: otherwise every resync would rewrite every status file (its history
 * entry's time and duration), and an idle daemon would never be idle nor its files quiet in git.
 * Passes that act (launch, stop, prune) are always recorded.
 */
function repeatsLastPass(history: ReadonlyArray<{ action: string; result: string; reason?: string }>, verdict: PassReport): boolean {
  const last = history.at(-1);
  if (last === undefined || last.action !== verdict.action || last.result !== verdict.result || last.reason !== verdict.reason) return false;
  return verdict.action === "none" || verdict.action === "plan" || verdict.result === "stalled";
}

/** mtime and size of a file, or "absent": enough to notice a change that no event reported. */
async function stampOf(file: string): Promise<string> {
  return stat(file).then(
    (s) => `${s.mtimeMs}:${s.size}`,
    () => "absent",
  );
}

/**
 * What the settings file and the OpenSSH client files it names (the ssh config, known_hosts) look
 * like now. Whether a node is reached at all is decided in those files too, and an operator fixes a
 * refusal there (a ProxyJump taken out, a host key recorded) without touching the settings or any
 * definition: a change to any of them has the next resync look at every cluster, stalled ones too.
 */
async function stampOfSettings(settingsFile: string, settings: Settings | undefined): Promise<string> {
  const ssh = settings === undefined ? undefined : sshClientFiles(sshOptionsOf(settings));
  const files = ssh === undefined ? [] : [...(await sshConfigFiles(ssh.sshConfig)), ssh.knownHosts];
  return (await Promise.all([settingsFile, ...files].map(async (file) => `${file}=${await stampOf(file)}`))).join(" ");
}

/**
 * Cluster names of the status files directly in `dir` (`<name>.status.json`): any name a definition
 * file could have had (`<name>.toml`, not hidden), an invalid one too, since a definition with an
 * invalid name gets a status file saying so, which must go when the definition goes.
 */
async function statusFileNames(dir: string): Promise<string[]> {
  const entries = await readdir(dir).catch(() => [] as string[]);
  return entries
    .filter((entry) => entry.endsWith(".status.json"))
    .map((entry) => entry.slice(0, -".status.json".length))
    .filter((name) => name !== "" && !name.startsWith("."));
}
