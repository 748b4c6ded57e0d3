/**
 * One reconcile pass of one cluster, level-triggered: the key is all it is given; it re-reads the
 * settings and the definition, re-observes what runs (ledger + probes), and takes the next action
 * — nothing, plan, stage, launch, replace, stop or prune. Status is written in `finally`, whatever
 * happened. Three outcomes are kept apart: terminal (stall until the file changes), expected wait
 * (requeue), transient (back off).
 */
import { access, rm, stat } from "node:fs/promises";
import { basename, join } from "node:path";
import type { Logger } from "pino";
import { observeCluster } from "../health/index.js";
import {
  launchCluster,
  Ledger,
  LaunchError,
  describeExit,
  processLabel,
  readLogTail,
  superviseCluster,
  teardownCluster,
  type LaunchDeadlines,
  type LedgerEntry,
  type TimelineEvent,
} from "../launch/index.js";
import type { NodeAccess, NodePool } from "../nodes/index.js";
import { planCluster } from "../planner/index.js";
import { createRegistrar, type Registrar } from "../router/index.js";
import { computeRevision, findClusterFiles, formatIssue, type ClusterSpec, type Settings } from "../spec/index.js";
import { isShardctlError, ShardctlError } from "../errors/index.js";
import { createMemory, type ClusterMemory } from "./cluster-memory.js";
import { ParseCache } from "./parse-cache.js";
import { lastCommitOf } from "./git-commit.js";
import { buildLaunchRequest, type LaunchNodes } from "./launch-request.js";
import { nodeConfigNamed, nodeConfigOf, controlNodeConfig, controlNodeName } from "./node-configs.js";
import type { PassOutcome } from "./queue/work-queue.js";
import { resolveManifest } from "../staging/index.js";
import { launchIdentity } from "./launch-identity.js";
import { probeFacts } from "./probe-facts.js";
import { stageModel, stagingSourceOf, type StagedModel } from "./stage-model.js";
import { composeStatus, type PassReport } from "./compose-status.js";
import {
  clearRuntime,
  failed,
  isServing,
  markRunning,
  messageOf,
  onRevision,
  recordEvent,
  setConditions,
  settle,
  stall,
  stallOnInvalid,
  type Verdict,
} from "./verdicts.js";
import { readStatus, statusFileFor, writeStatus } from "./status/index.js";

export interface ReconcilerOptions {
  /** The watched directory of definitions (absolute). */
  dir: string;
  settingsFile: string;
  pool: NodePool;
  log: Logger;
  /** Ask for another pass of a cluster (the daemon's work queue). */
  requeue: (name: string) => void;
  launchDeadlines?: Partial<LaunchDeadlines>;
  /** Health monitor tuning. Defaults: poll every 1000 ms, 3 strikes. */
  monitor?: { pollIntervalMs?: number; strikes?: number };
  /** Called after every pass, for metrics. */
  onPass?: (name: string, report: PassReport, durationMs: number, stagesAlive: number) => void;
}


/** What every step of one pass works on. */
interface Pass {
  name: string;
  file: string;
  settings: Settings;
  ledger: Ledger;
  memory: ClusterMemory;
  spec: ClusterSpec;
  revision: string;
}

type Planned = NonNullable<ClusterMemory["planned"]>;

export class Reconciler {
  private readonly memories = new Map<string, ClusterMemory>();
  private registrarCache: { key: string; registrar: Registrar } | undefined;
  private readonly parsed = new ParseCache();
  private settingsStamp: string | undefined;

  constructor(private readonly o: ReconcilerOptions) {}

  /** Names of clusters the daemon knows of: definitions plus anything remembered or in the ledger. */
  async knownClusters(): Promise<string[]> {
    // Everything is looked at now: a resync only needs to notice settings changes after this.
    this.settingsStamp = await stampOf(this.o.settingsFile);
    const files = await findClusterFiles(this.o.dir).catch(() => []);
    const names = new Set(files.map((f) => basename(f, ".toml")));
    for (const name of this.memories.keys()) names.add(name);
    const settings = await this.parsed.loadSettings(this.o.settingsFile).catch(() => undefined);
    if (settings !== undefined) for (const entry of await this.ownEntries(settings)) names.add(entry.cluster);
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
    const settings = await this.parsed.loadSettings(this.o.settingsFile).catch(() => undefined);
    const settingsStamp = await stampOf(this.o.settingsFile);
    if (settings === undefined || settingsStamp !== this.settingsStamp) return this.knownClusters();
    const files = await findClusterFiles(this.o.dir).catch(() => [] as string[]);
    const running = new Set((await this.ownEntries(settings)).map((e) => e.cluster));
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

  /** Ask the next pass of `name` to forget its restart budget (`shardctl reconcile`). */
  async requestRetry(name: string): Promise<void> {
    const memory = await this.memoryOf(name);
    memory.retryRequested = true;
    // Said in the status file before the request is acknowledged, so `shardctl reconcile && shardctl
    // wait` never reads the Stalled that the request just lifted.
    const file = join(this.o.dir, `${name}.toml`);
    if (!(await exists(file))) return;
    const revision = memory.lastGood?.revision ?? "";
    const message = "`shardctl reconcile` asked for a pass with a fresh restart budget";
    setConditions(memory, revision, {
      Stalled: { status: "False", reason: "RetryRequested", message },
      Reconciling: { status: "True", reason: "RetryRequested", message },
    });
    const settings = await this.parsed.loadSettings(this.o.settingsFile).catch(() => undefined);
    await this.writeStatus(name, file, memory, { action: "none", result: "waiting", health: isServing(memory) ? "Healthy" : "Progressing" }, settings);
  }

  /** Stop supervising every cluster, leaving them running (they are desired state). */
  async detachAll(): Promise<void> {
    await Promise.all([...this.memories.values()].map((m) => m.supervision?.supervision.stop()));
  }

  /** Tear down everything this daemon started (the demo's --teardown-on-exit). */
  async teardownAll(): Promise<void> {
    const settings = await this.parsed.loadSettings(this.o.settingsFile);
    const ledger = new Ledger(settings.daemon.stateDir);
    await this.detachAll();
    for (const entry of await this.ownEntries(settings)) {
      const memory = this.memoryOfSync(entry.cluster);
      await teardownCluster(entry, this.teardownContext(settings, ledger, memory));
      // Say so in the status file: a stale Ready must not outlive the processes.
      const file = join(this.o.dir, `${entry.cluster}.toml`);
      if (await exists(file)) {
        const verdict = settle(memory, "stop", "Stopped", "TornDownOnExit", "the daemon tore the cluster down as it exited (--teardown-on-exit)");
        clearRuntime(memory, memory.lastGood?.revision ?? entry.revision);
        await this.writeStatus(entry.cluster, file, memory, verdict, settings);
      }
    }
  }

  async reconcile(name: string): Promise<PassOutcome> {
    const started = Date.now();
    const memory = await this.memoryOf(name);
    const file = join(this.o.dir, `${name}.toml`);
    let verdict: Verdict;
    let settings: Settings | undefined;
    try {
      settings = await this.parsed.loadSettings(this.o.settingsFile);
      verdict = await this.converge(name, file, settings, memory);
    } catch (error) {
      if (!isShardctlError(error)) this.o.log.error({ cluster: name, err: error }, "reconcile pass failed unexpectedly");
      verdict = failed(memory, error, "none");
    }
    const durationMs = Date.now() - started;
    memory.fileStamp = await stampOf(file);
    memory.settled = (verdict.outcome.kind === "done" || verdict.outcome.kind === "stall") && memory.supervision === undefined;
    if (!repeatsLastPass(memory.history, verdict)) {
      memory.history = [...memory.history, { at: new Date(started).toISOString(), action: verdict.action, result: verdict.result, ...(verdict.reason ? { reason: verdict.reason } : {}), durationMs }].slice(-5);
    }
    if (verdict.pruned !== true) await this.writeStatus(name, file, memory, verdict, settings);
    this.o.onPass?.(name, verdict, durationMs, memory.observation?.stages.filter((s) => s.alive).length ?? 0);
    return verdict.outcome;
  }

  private async converge(name: string, file: string, settings: Settings, memory: ClusterMemory): Promise<Verdict> {
    const ledger = new Ledger(settings.daemon.stateDir);

    // Prune what no definition wants any more.
    if (!(await exists(file))) return this.prune(name, settings, ledger, memory);

    // Load the definition; an invalid edit leaves whatever runs alone.
    const loaded = await this.parsed.loadCluster(file, settings);
    if (!loaded.ok) return stallOnInvalid(memory, loaded.issues.map(formatIssue), await ledger.read(name));
    const spec = loaded.value;
    const revision = computeRevision(spec, settings);
    const fileChanged = memory.lastGood?.revision !== revision;
    memory.lastGood = { spec, revision };
    if (fileChanged) onRevision(memory, revision);
    if (memory.retryRequested === true) {
      // `shardctl reconcile <name>`: a fresh restart budget and a fresh look at the model.
      memory.retryRequested = false;
      memory.restarts = { revision, count: 0, evidence: memory.restarts?.evidence ?? [] };
      delete memory.planned;
    }
    if (memory.gitCommit?.revision !== revision) memory.gitCommit = { revision, commit: await lastCommitOf(file) };

    // Suspend: no action at all.
    if (spec.suspend) return settle(memory, "none", "Suspended", "Suspended", "reconciliation is suspended (suspend = true)");

    // Observe what runs (only what this daemon's directory launched is ours to touch).
    const recorded = await ledger.read(name);
    if (recorded !== undefined && !this.owns(recorded)) return this.foreign(memory, recorded);
    const entry = recorded;
    const observation = entry === undefined ? undefined : await this.observe(entry, settings, memory);

    // Stop: tear down, keep the status.
    if (spec.desired === "stopped") {
      if (entry !== undefined) await this.teardown(entry, settings, ledger, memory);
      clearRuntime(memory, revision);
      return settle(memory, entry === undefined ? "none" : "stop", "Stopped", "Stopped", 'desired = "stopped"');
    }

    // Plan (once per revision).
    const planned = await this.plan(spec, settings, revision, memory);
    if (!planned.plan.feasible) {
      const message = planned.plan.errors.map((e) => `${e.reason}: ${e.message}`).join("; ");
      return stall(memory, "plan", planned.plan.errors[0]?.reason ?? "PlanInfeasible", `the plan is infeasible: ${message}`, entry?.phase === "running");
    }

    // Distributed serving off: plan and report only.
    if (!settings.distributed.enabled) {
      if (entry !== undefined) await this.teardown(entry, settings, ledger, memory);
      clearRuntime(memory, revision);
      return settle(memory, entry === undefined ? "plan" : "stop", "Disabled", "DistributedDisabled", `[distributed] enabled = false in ${settings.file}: planned, nothing staged or launched`);
    }

    // Adopt what already runs from the same launch identity; watch it.
    const identity = launchIdentity(spec, settings, planned.plan);
    const sameLaunch = entry !== undefined && (entry.revision === revision || entry.identity === identity);
    // Only a process that is definitely gone breaks it here: doubtful probes (a closed port, a
    // refused /health) are the supervision's to judge, with strikes, so one lost packet on a
    // resync never tears a healthy cluster down.
    const broken = (observation?.gone.length ?? 0) > 0;
    if (entry !== undefined && entry.phase === "running" && sameLaunch && !broken) {
      if (entry.revision !== revision) await this.applyInPlace(entry, spec, settings, ledger, revision);
      this.supervise(entry, settings, ledger, memory);
      const health = observation?.health === "Degraded" ? "Degraded" : "Healthy";
      markRunning(memory, revision, entry, health);
      return { action: "none", result: "success", health, outcome: { kind: "done" } };
    }

    // Replace what runs at another revision, is broken, or was left half-launched or half-torn-down.
    if (entry !== undefined) {
      setConditions(memory, revision, { Ready: { status: "False", reason: "Replacing", message: `tearing down revision ${entry.revision.slice(0, 12)} (${entry.phase}${broken ? `; ${observation!.gone.join(", ")} gone` : ""})` } });
      await this.teardown(entry, settings, ledger, memory);
      clearRuntime(memory, revision);
    }

    // Respect the restart budget of this revision.
    const restarts = memory.restarts!;
    if (restarts.count >= settings.daemon.restartBudget) {
      const last = restarts.evidence.at(-1);
      const cause = last === undefined ? "" : `; the last failure: ${last.reason}: ${last.message}`;
      return stall(memory, "launch", "RestartBudgetExhausted", `launched ${restarts.count} times at this revision (budget ${settings.daemon.restartBudget})${cause}. Fix the cause and edit the definition, or run \`shardctl reconcile ${name}\``, false);
    }

    // Stage the model on every node.
    const pass: Pass = { name, file, settings, ledger, memory, spec, revision };
    const nodes = this.nodesOf(spec, settings);
    const staged = await this.stage(pass, planned, nodes);

    // Launch: stages in order, coordinator, readiness, router; then watch it.
    const running = await this.launch(pass, planned, nodes, staged, identity);
    this.supervise(running, settings, ledger, memory);
    memory.observation = await this.observe(running, settings, memory);
    markRunning(memory, revision, running, "Healthy");
    return { action: "launch", result: "success", health: "Healthy", outcome: { kind: "done" } };
  }

  // --- steps -------------------------------------------------------------------------------

  private async stage(pass: Pass, planned: Planned, nodes: LaunchNodes): Promise<StagedModel> {
    const { memory, revision } = pass;
    setConditions(memory, revision, {
      Ready: { status: "False", reason: "Staging", message: "nothing serves this revision yet" },
      Reconciling: { status: "True", reason: "Staging", message: "staging the model on every node" },
    });
    await this.writeProgress(pass.name, pass.file, memory, "stage", pass.settings);
    try {
      const staged = await stageModel(pass.spec, pass.settings, planned.plan, planned.profile, nodes, (event) => {
        const next = { node: event.node, state: event.phase === "done" ? ("present" as const) : ("staging" as const), bytesDone: event.bytesDone, bytesTotal: event.bytesTotal };
        memory.staging = [...memory.staging.filter((s) => s.node !== event.node), next].sort((a, b) => a.node.localeCompare(b.node));
      }, planned.pinned);
      setConditions(memory, revision, { Staged: { status: "True", reason: "AllNodesPresent", message: `model present on ${pass.spec.nodes.length} stage nodes and the coordinator's (${staged.bytesTransferred} bytes transferred this pass)` } });
      return staged;
    } catch (error) {
      setConditions(memory, revision, { Staged: { status: "False", reason: isShardctlError(error) ? error.reason : "StagingFailed", message: messageOf(error) } });
      throw error;
    }
  }

  /** One launch, counted against the revision's restart budget; failures keep their evidence. */
  private async launch(pass: Pass, planned: Planned, nodes: LaunchNodes, staged: StagedModel, identity: string): Promise<LedgerEntry> {
    const { memory, revision, settings, ledger, name } = pass;
    const restarts = memory.restarts!;
    restarts.count += 1;
    setConditions(memory, revision, { Reconciling: { status: "True", reason: "Launching", message: `launch ${restarts.count} of ${settings.daemon.restartBudget} at this revision` } });
    await this.writeProgress(name, pass.file, memory, "launch", settings);
    const request = { ...(await buildLaunchRequest(pass.spec, settings, revision, planned.plan, nodes, staged.modelPaths, this.o.launchDeadlines)), identity, owner: this.o.dir };
    memory.timeline = [];
    try {
      await launchCluster(request, {
        ledger,
        registrar: this.registrarFor(settings),
        heldPorts: async () => (await ledger.list()).filter((e) => e.cluster !== name).flatMap((e) => e.ports.map((p) => ({ host: p.host, port: p.port, holder: `cluster ${e.cluster}` }))),
        onEvent: (event) => recordEvent(memory, event),
      });
    } catch (error) {
      if (error instanceof LaunchError) {
        restarts.evidence = [...restarts.evidence, { at: new Date().toISOString(), reason: error.reason, message: error.message, logTail: error.logTail }].slice(-5);
      }
      throw error;
    }
    const running = await ledger.read(name);
    if (running === undefined) throw new ShardctlError("LedgerMissing", "the launch succeeded but left no ledger entry");
    return running;
  }

  private async plan(spec: ClusterSpec, settings: Settings, revision: string, memory: ClusterMemory): Promise<Planned> {
    if (memory.planned?.revision === revision) return memory.planned;
    // Probes only matter where something will run: with distributed serving off, plan from the registry.
    const facts = settings.distributed.enabled ? await probeFacts(spec, this.nodesOf(spec, settings).stages) : {};
    // A Hub branch is resolved to its commit once, here: the plan and every node's files then come
    // from that one commit, however the branch moves meanwhile.
    const pinned = spec.model.source === "hub" && settings.distributed.enabled ? await resolveManifest(stagingSourceOf(spec, settings)) : undefined;
    const { profile, plan } = await planCluster(spec, settings, facts, pinned?.commit);
    memory.planned = { revision, profile, plan, ...(pinned === undefined ? {} : { pinned }) };
    setConditions(memory, revision, {
      Planned: plan.feasible
        ? { status: "True", reason: "PlanFeasible", message: `${plan.stages.length} stages over ${plan.model.layers} layers (${plan.splitUsed} split)` }
        : { status: "False", reason: plan.errors[0]?.reason ?? "PlanInfeasible", message: plan.errors.map((e) => e.message).join("; ") },
    });
    return memory.planned;
  }

  private async observe(entry: LedgerEntry, settings: Settings, memory: ClusterMemory) {
    const layers = memory.planned?.plan.stages.map((s) => s.layers);
    const observation = await observeCluster(entry, {
      nodeFor: (n) => this.nodeFor(n, settings),
      ...(layers === undefined ? {} : { layers }),
      ...(memory.observation === undefined ? {} : { previous: memory.observation }),
    });
    memory.observation = observation;
    return observation;
  }

  private async teardown(entry: LedgerEntry, settings: Settings, ledger: Ledger, memory: ClusterMemory): Promise<void> {
    await memory.supervision?.supervision.stop();
    delete memory.supervision;
    await teardownCluster(entry, this.teardownContext(settings, ledger, memory));
    delete memory.observation;
  }

  /**
   * A new revision that does not change what the processes run from: record it, and bring the
   * router registration in line (backend name or weight may have changed). No restart.
   */
  private async applyInPlace(entry: LedgerEntry, spec: ClusterSpec, settings: Settings, ledger: Ledger, revision: string): Promise<void> {
    const registrar = this.registrarFor(settings);
    const url = entry.coordinatorUrl;
    if (entry.routerBackend !== undefined && (!spec.router.register || entry.routerBackend !== spec.router.backend)) {
      await registrar.deregister(entry.routerBackend);
      delete entry.routerBackend;
    }
    if (spec.router.register && url !== undefined) {
      await registrar.register({ name: spec.router.backend, url, models: [spec.model.id], weight: spec.router.weight });
      entry.routerBackend = spec.router.backend;
    }
    entry.revision = revision;
    await ledger.write(entry);
  }

  private async prune(name: string, settings: Settings, ledger: Ledger, memory: ClusterMemory): Promise<Verdict> {
    const recorded = await ledger.read(name);
    // Another directory's cluster of the same name is not ours to prune.
    const entry = recorded !== undefined && this.owns(recorded) ? recorded : undefined;
    if (entry !== undefined && !(await exists(this.o.dir))) {
      // The directory itself is gone (a broken checkout, a wrong mount): that is no decision to stop anything.
      const message = `${this.o.dir} does not exist; refusing to tear down what it defined until it is back`;
      this.o.log.warn({ cluster: name }, message);
      return stall(memory, "prune", "DefinitionsDirMissing", message, true);
    }
    if (entry !== undefined) {
      // Prune guard: a directory that suddenly holds no definitions while several clusters run is
      // more likely a broken checkout than a decision to stop everything.
      const definitions = await findClusterFiles(this.o.dir).catch(() => [] as string[]);
      const running = await this.ownEntries(settings);
      if (definitions.length === 0 && running.length > 1 && !settings.daemon.allowMassPrune) {
        const message = `${this.o.dir} holds no cluster definitions while ${running.length} clusters run; refusing to tear them all down (set [daemon] allow_mass_prune = true to allow it)`;
        this.o.log.warn({ cluster: name }, message);
        return stall(memory, "prune", "MassPruneRefused", message, entry.phase === "running");
      }
      await this.teardown(entry, settings, ledger, memory);
    }
    // Remove the status file last: CI reading it sees the teardown finish.
    await rm(statusFileFor(join(this.o.dir, `${name}.toml`)), { force: true });
    this.memories.delete(name);
    return { action: entry === undefined ? "none" : "prune", result: "success", health: "Stopped", outcome: { kind: "done" }, pruned: true };
  }

  private supervise(entry: LedgerEntry, settings: Settings, ledger: Ledger, memory: ClusterMemory): void {
    if (memory.supervision !== undefined && memory.supervision.startedAt === entry.startedAt) return;
    void memory.supervision?.supervision.stop();
    const supervision = superviseCluster(entry, {
      ...this.teardownContext(settings, ledger, memory),
      monitor: {
        ...(this.o.monitor ?? {}),
        ...(memory.planned === undefined ? {} : { layers: memory.planned.plan.stages.map((s) => s.layers) }),
      },
    });
    memory.supervision = { startedAt: entry.startedAt, supervision };
    void supervision.ended.then(async ({ death, teardown }) => {
      if (memory.supervision?.supervision !== supervision) return;
      delete memory.supervision;
      delete memory.observation;
      const { logTail, exit } = await this.deathEvidence(entry, death.label, settings);
      const restarts = memory.restarts;
      if (restarts !== undefined) {
        const message = `${death.label} on ${death.node}: ${death.detail}${exit === undefined ? "" : ` (${exit})`}`;
        restarts.evidence = [...restarts.evidence, { at: death.at, reason: death.reason, message, logTail }].slice(-5);
      }
      memory.lastError = { reason: death.reason, message: `${death.label} on ${death.node}: ${death.detail}`, at: death.at };
      // Ready is withdrawn at once; the pass this requeues writes it down.
      const revision = memory.lastGood?.revision ?? entry.revision;
      setConditions(memory, revision, { Ready: { status: "False", reason: death.reason, message: `${death.label} on ${death.node}: ${death.detail}` } });
      clearRuntime(memory, revision);
      if (!teardown.ok) this.o.log.error({ cluster: entry.cluster, err: teardown.error }, "teardown after a death is incomplete; the next pass retries it");
      this.o.log.warn({ cluster: entry.cluster, reason: death.reason, detail: death.detail }, "cluster lost a process: deregistered and torn down");
      this.o.requeue(entry.cluster);
    });
  }

  /** Ledger entries launched from this daemon's directory (entries from before owners were recorded count as ours). */
  private async ownEntries(settings: Settings): Promise<LedgerEntry[]> {
    return (await new Ledger(settings.daemon.stateDir).list()).filter((e) => this.owns(e));
  }

  private owns(entry: LedgerEntry): boolean {
    return entry.owner === undefined || entry.owner === this.o.dir;
  }

  /** A cluster of this name runs, launched from another directory sharing the state directory. */
  private foreign(memory: ClusterMemory, entry: LedgerEntry): Verdict {
    return stall(
      memory,
      "none",
      "ClusterOwnedElsewhere",
      `a cluster named "${entry.cluster}" runs from ${entry.owner} with the same state_dir; rename this one or give the daemons separate state_dir settings`,
      false,
    );
  }

  // --- status -----------------------------------------------------------------------------

  private async writeProgress(name: string, file: string, memory: ClusterMemory, action: string, settings: Settings): Promise<void> {
    await this.writeStatus(name, file, memory, { action, result: "waiting", health: "Progressing" }, settings);
  }

  private async writeStatus(name: string, file: string, memory: ClusterMemory, report: PassReport, settings: Settings | undefined): Promise<void> {
    const status = composeStatus(name, file, memory, report, settings);
    memory.status = status;
    try {
      await writeStatus(statusFileFor(file), status);
    } catch (error) {
      this.o.log.error({ cluster: name, err: error }, "could not write the status file");
    }
  }

  private async memoryOf(name: string): Promise<ClusterMemory> {
    const existing = this.memories.get(name);
    if (existing !== undefined) return existing;
    const previous = await readStatus(statusFileFor(join(this.o.dir, `${name}.toml`))).catch(() => undefined);
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

  // --- collaborators -----------------------------------------------------------------------

  private nodesOf(spec: ClusterSpec, settings: Settings): { stages: NodeAccess[]; coordinator: NodeAccess } {
    const stages = spec.nodes.map((n) => this.o.pool.get(nodeConfigOf(settings.nodes[n]!)));
    const coordinator =
      spec.coordinator.node === controlNodeName
        ? this.o.pool.get(controlNodeConfig(settings))
        : this.o.pool.get(nodeConfigOf(settings.nodes[spec.coordinator.node]!));
    return { stages, coordinator };
  }

  private nodeFor(name: string, settings: Settings): NodeAccess {
    const config = nodeConfigNamed(name, settings);
    if (config === undefined) throw new ShardctlError("NodeUnregistered", `node "${name}" recorded in the ledger is no longer in ${settings.file}; add it back to clean up what runs there`);
    return this.o.pool.get(config);
  }

  private registrarFor(settings: Settings): Registrar {
    const key = JSON.stringify(settings.router);
    if (this.registrarCache?.key !== key) {
      this.registrarCache = {
        key,
        registrar: createRegistrar({
          kind: settings.router.kind,
          ...(settings.router.config === undefined ? {} : { config: settings.router.config }),
          ...(settings.router.adminUrl === undefined ? {} : { adminUrl: settings.router.adminUrl }),
          ...(settings.router.adminTokenEnv === undefined ? {} : { adminTokenEnv: settings.router.adminTokenEnv }),
        }),
      };
    }
    return this.registrarCache.registrar;
  }

  private teardownContext(settings: Settings, ledger: Ledger, memory: ClusterMemory) {
    return {
      ledger,
      registrar: this.registrarFor(settings),
      nodeFor: (n: string) => this.nodeFor(n, settings),
      graceMs: this.o.launchDeadlines?.stopGraceMs ?? 5_000,
      onEvent: (event: TimelineEvent) => recordEvent(memory, event),
    };
  }

  /** The dead process's last log lines and how it ended (exit status or signal, from its wrapper). */
  private async deathEvidence(entry: LedgerEntry, label: string, settings: Settings): Promise<{ logTail: string[]; exit?: string }> {
    const process = entry.processes.find((p) => processLabel(p.role, p.index) === label);
    if (process === undefined) return { logTail: [] };
    const node = this.nodeFor(process.node, settings);
    const [logTail, exit] = await Promise.all([readLogTail(node, process).catch(() => []), describeExit(node, process).catch(() => undefined)]);
    return { logTail, ...(exit === undefined ? {} : { exit }) };
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
  return stat(file).then((s) => `${s.mtimeMs}:${s.size}`, () => "absent");
}

async function exists(path: string): Promise<boolean> {
  return access(path).then(() => true, () => false);
}

