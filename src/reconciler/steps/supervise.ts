/**
 * Watch what runs: the health monitor tears the whole cluster down and deregisters it on the first
 * death (a pipeline cannot survive the loss of a stage), keeps the evidence, withdraws Ready at
 * once and asks for a pass, which relaunches within the restart budget. A node the daemon cannot
 * reach over SSH while the pipeline serves is no death: the status says Degraded and names it until
 * it answers again.
 */
import type { CutOffEvent, ObservabilityEvent } from "../../health/index.js";
import { superviseCluster, type LedgerEntry } from "../../launch/index.js";
import { definitionOf, type Pass } from "../pass.js";
import { explainDeath, recordDeath, type RecordedDeath } from "../record-death.js";
import type { Step } from "../run-step.js";
import { clearRuntime, dying, isServing, isStalled, markRunning, markSeenServing, recheckUnlessHealthy, setConditions, type ConditionUpdates } from "../verdicts.js";
import { observeEntry } from "./observe.js";
import { routerSilence } from "./router-silence.js";

/** The last step of a launch: watch the new processes and say the cluster is Ready. */
export const supervise: Step = {
  name: "supervise",
  action: "launch",
  failure: "ObserveFailed",
  async run(pass) {
    const { revision } = definitionOf(pass);
    const running = pass.launched;
    if (running === undefined) throw new Error("supervise step without a launch");
    watch(pass, running);
    delete pass.memory.recheckMs;
    // The launch itself saw it serve: /health ready and a one-token request answered.
    markSeenServing(pass.memory, running);
    let health = markRunning(pass.memory, revision, running, await observeEntry(pass, running));
    if (health === undefined) return { ...dying(pass.memory), action: "launch" };
    // Registered in a router that does not answer: it serves, but not through the router.
    const silence = routerSilence(pass, running);
    if (silence !== undefined) {
      setConditions(pass.memory, revision, { Registered: silence });
      if (health === "Healthy") health = "Degraded";
    }
    return { action: "launch", result: "success", health, outcome: recheckUnlessHealthy(pass.memory, health) };
  },
};

/**
 * Start supervising `entry`, unless this launch is already watched. A death is recorded the moment
 * it is detected — Ready withdrawn, the cause (the first process that died) kept as evidence, the
 * status file written — before the teardown runs, so neither a reader of the file nor a pass that
 * races the teardown ever misses it. The log tail and exit status are added once the teardown ended.
 */
export function watch(pass: Pass, entry: LedgerEntry): void {
  const { memory, world, settings, ledger } = pass;
  if (memory.supervision !== undefined && memory.supervision.startedAt === entry.startedAt) return;
  // A launch whose death is recorded is being torn down (a pass that read the ledger before the
  // death got here after it): nothing of it is left to watch.
  if (memory.deathRecordedFor === entry.startedAt) return;
  void memory.supervision?.supervision.stop();
  let recorded: RecordedDeath | undefined;
  let explained: Promise<void> = Promise.resolve();
  const unobservable = new Map<string, ObservabilityEvent>();
  const observability = (event: ObservabilityEvent, lost: boolean): void => {
    if (lost) unobservable.set(event.node, event);
    else unobservable.delete(event.node);
    if (memory.supervision?.supervision !== supervision) return;
    if (lost) world.log.warn({ cluster: entry.cluster, node: event.node, detail: event.detail }, "node unobservable over SSH; the cluster keeps serving");
    else world.log.info({ cluster: entry.cluster, node: event.node }, "node observable again");
    showObservability(pass, entry, unobservable);
  };
  const cutOff = (event: CutOffEvent): void => {
    if (memory.supervision?.supervision !== supervision) return;
    if (event.ended === true) {
      delete memory.supervision.cutOff;
      world.log.info({ cluster: entry.cluster }, "the daemon reaches the cluster again");
    } else {
      memory.supervision.cutOff = event;
      world.log.warn(
        { cluster: entry.cluster, nodes: event.nodes, since: event.since },
        "the daemon reaches none of the cluster's nodes; nothing is torn down meanwhile",
      );
    }
    showObservability(pass, entry, unobservable);
  };
  const supervision = superviseCluster(entry, {
    ...world.teardownContext(settings, ledger, memory),
    monitor: {
      cutOffGraceMs: settings.daemon.cutOffGraceSeconds * 1000,
      ...(world.options.monitor ?? {}),
      ...(memory.planned === undefined ? {} : { layers: memory.planned.plan.stages.map((s) => s.layers) }),
      onUnobservable: (event) => observability(event, true),
      onObservable: (event) => observability(event, false),
      onCutOff: cutOff,
    },
    onLogTrimmed: (node, file, bytes) => world.noteLogTrimmed(entry.cluster, node, file, bytes),
    onDeath: (death) => {
      recorded = recordDeath(pass, entry, death);
      // Alongside the teardown, not after it: the record names a silent peer while the fault lasts.
      explained = explainDeath(pass, entry, recorded, "at-death").catch((error: unknown) =>
        world.log.warn({ cluster: entry.cluster, err: error }, "could not read the evidence of a death"),
      );
    },
  });
  memory.supervision = { startedAt: entry.startedAt, entry, supervision, unobservable };
  void supervision.ended.then(async ({ death, teardown }) => {
    await explained;
    await explainDeath(pass, entry, recorded, "after-teardown").catch((error: unknown) =>
      world.log.warn({ cluster: entry.cluster, err: error }, "could not read the evidence of a death"),
    );
    // A pass that raced the teardown may have moved on already; one more pass writes the evidence down.
    if (memory.supervision?.supervision !== supervision) return world.options.requeue(entry.cluster);
    delete memory.supervision;
    // Torn down: nothing runs (the death's record said the survivors were being stopped). A
    // teardown left incomplete is retried by the next pass, which says what it could not stop.
    if (teardown.ok) {
      clearRuntime(memory, memory.lastGood?.revision ?? entry.revision);
      // Nothing of it runs: its nodes' memory is free until its relaunch claims it again (it may
      // stall instead, and hold nothing).
      world.memoryClaims.release(entry.cluster);
    }
    delete memory.observation;
    if (!teardown.ok) world.log.error({ cluster: entry.cluster, err: teardown.error }, "teardown after a death is incomplete; the next pass retries it");
    world.log.warn({ cluster: entry.cluster, reason: death.reason, detail: recorded?.message ?? death.detail }, "cluster lost a process: deregistered and torn down");
    world.options.requeue(entry.cluster);
  });
}

/**
 * Say at once (the status file written, nothing network-bound waited for) which nodes the daemon
 * cannot observe while the cluster serves: health Degraded, and the condition of what runs there
 * (StagesListening, or CoordinatorHealthy for a node running only the coordinator) Unknown, naming
 * the nodes; back to Healthy once every node answers. Cut off from every node (DaemonCutOff), Ready
 * is Unknown; reached again, Ready stays Unknown (ProbeUnanswered) until the pass it asks for looks.
 * Only while the cluster is Ready, or said cut off: a death or a pass that withdrew Ready says more
 * than this.
 */
export function showObservability(pass: Pass, entry: LedgerEntry, unobservable: ReadonlyMap<string, ObservabilityEvent>): void {
  const { memory, world, settings } = pass;
  const cutOff = memory.supervision?.cutOff;
  const saidCutOff = isCutOff(memory);
  if (!isServing(memory) && !saidCutOff) return;
  // The revision Ready holds at: what serves, which is not the last valid definition's while a stall
  // keeps an older revision serving.
  const ready = memory.conditions.find((c) => c.type === "Ready")?.observedRevision;
  const revision = ready !== undefined && ready !== "" ? ready : (memory.lastGood?.revision ?? entry.revision);
  if (cutOff !== undefined) {
    markUnobservable(memory, revision, unobservable, cutOff);
    void world.writeStatus(entry.cluster, memory, { action: "none", result: "success", reason: "DaemonCutOff", health: "Degraded" }, settings);
    return;
  }
  // Reached again: what runs is looked at now (it may have died meanwhile, or a stall may stand);
  // until that look, Ready is not vouched for.
  if (saidCutOff) {
    setConditions(memory, revision, {
      Ready: { status: "Unknown", reason: "ProbeUnanswered", message: "the daemon reaches the cluster again after it was cut off: a look at what runs is under way" },
    });
    world.options.requeue(entry.cluster);
  }
  if (unobservable.size === 0) {
    // The node answering again says nothing of what the last pass could not confirm otherwise (a
    // probe without an answer, the router): those conditions stay as they were, transition time
    // and all, until a pass looks again.
    // Nor does it lift a stall (an invalid definition beside the revision that serves): Stalled,
    // Reconciling and the last error stay until a pass sees the change.
    const wasStalled = isStalled(memory);
    const kept = memory.conditions.filter(
      (c) =>
        (c.status === "Unknown" && c.reason !== "NodeUnobservable" && c.reason !== "DaemonCutOff") || (wasStalled && (c.type === "Stalled" || c.type === "Reconciling")),
    );
    const lastError = memory.lastError;
    markRunning(memory, revision, entry);
    memory.conditions = memory.conditions.map((c) => kept.find((u) => u.type === c.type) ?? c);
    if (wasStalled && lastError !== undefined) memory.lastError = lastError;
    // The cards are the last pass's, taken while the node did not answer: until a pass looks again
    // (asked now), a card that says its process could not be asked keeps the cluster Degraded.
    const unsure = [...(memory.observation?.stages ?? []), ...(memory.observation?.coordinator === undefined ? [] : [memory.observation.coordinator])].some(
      (card) => "liveness" in card && card.liveness === "unknown",
    );
    const degraded = wasStalled || unsure || kept.some((c) => c.status === "Unknown");
    void world.writeStatus(entry.cluster, memory, { action: "none", result: "success", health: degraded ? "Degraded" : "Healthy" }, settings);
    if (unsure) world.options.requeue(entry.cluster);
    return;
  }
  markUnobservable(memory, revision, unobservable);
  void world.writeStatus(entry.cluster, memory, { action: "none", result: "success", reason: "NodeUnobservable", health: "Degraded" }, settings);
}

/**
 * The condition of what runs on unobservable nodes (StagesListening, or CoordinatorHealthy for a
 * node running only the coordinator): Unknown, naming them. None while every node answers.
 */
export function unobservableConditions(unobservable: ReadonlyMap<string, ObservabilityEvent>, cutOff?: CutOffEvent): ConditionUpdates {
  if (cutOff !== undefined) {
    const graceEnds = new Date(Date.parse(cutOff.since) + cutOff.graceMs).toISOString();
    const message = `the daemon reaches none of this cluster's nodes (${cutOff.nodes.join(", ")}) and its coordinator does not answer, since ${cutOff.since}: the daemon's own network, most likely, or every one of them at once. The pipeline may serve its clients meanwhile: nothing is torn down or counted; if nothing answers by ${graceEnds}, its silence is judged as a death`;
    return {
      Ready: { status: "Unknown", reason: "DaemonCutOff", message },
      StagesListening: { status: "Unknown", reason: "NodeUnobservable", message },
      CoordinatorHealthy: { status: "Unknown", reason: "NodeUnobservable", message },
    };
  }
  if (unobservable.size === 0) return {};
  const events = [...unobservable.values()];
  const message = `${events.map((e) => `node ${e.node} (${e.labels.join(", ")}) is unobservable over SSH: ${e.detail}`).join("; ")}; the pipeline still serves, reconnecting`;
  const stages = events.some((e) => e.labels.some((l) => l.startsWith("stage-")));
  return stages
    ? { StagesListening: { status: "Unknown", reason: "NodeUnobservable", message } }
    : { CoordinatorHealthy: { status: "Unknown", reason: "NodeUnobservable", message } };
}

/**
 * The conditions of `unobservableConditions`, and the stage cards of what runs on those nodes with
 * their liveness unknown. Returns whether any node is unobservable.
 */
export function markUnobservable(memory: Pass["memory"], revision: string, unobservable: ReadonlyMap<string, ObservabilityEvent>, cutOff?: CutOffEvent): boolean {
  if (unobservable.size === 0 && cutOff === undefined) return false;
  // The cards of what runs there say so too: alive was the last look's word, which no one can confirm now.
  const silent = new Set([...unobservable.keys(), ...(cutOff?.nodes ?? [])]);
  const observation = memory.observation;
  if (observation !== undefined) {
    memory.observation = {
      ...observation,
      stages: observation.stages.map((card) => (silent.has(card.node) && card.liveness !== "gone" ? { ...card, alive: false, liveness: "unknown" as const } : card)),
      // Cut off, the coordinator's "ok" was the last look's word too.
      ...(cutOff !== undefined && observation.coordinator !== undefined ? { coordinator: { ...observation.coordinator, health: "unknown" as const } } : {}),
    };
  }
  setConditions(memory, revision, unobservableConditions(unobservable, cutOff));
  return true;
}

/** Whether the status says the daemon is cut off from the cluster (Ready Unknown, DaemonCutOff). */
function isCutOff(memory: Pass["memory"]): boolean {
  return memory.conditions.some((c) => c.type === "Ready" && c.status === "Unknown" && c.reason === "DaemonCutOff");
}
