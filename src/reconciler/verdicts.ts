/**
 * How a pass ends, and the condition bookkeeping each ending implies. Pure functions of a
 * cluster's memory: the pass story in converge.ts says what happened, these say what that means
 * for the status (health, conditions, last error) and for the work queue (done, stall, retry).
 */
import { healthInWords, type ClusterObservation } from "../health/index.js";
import type { LedgerEntry, TimelineEvent } from "../launch/index.js";
import { isShardctlError, messageOf } from "../errors/index.js";
import type { ClusterMemory } from "./cluster-memory.js";
import type { PassReport } from "./compose-status.js";
import { LaunchCalledOff } from "./call-off.js";
import type { PassOutcome } from "./queue/work-queue.js";
import { setCondition, type ConditionReason, type ConditionType, type ConditionUpdate, type Health } from "./status/index.js";

/** What one pass concluded, before it is turned into a status and a queue outcome. */
export interface Verdict extends PassReport {
  outcome: PassOutcome;
}

/** A converged state with nothing running for it to watch. */
export function settle(memory: ClusterMemory, action: string, health: Health, reason: ConditionReason, message: string): Verdict {
  const revision = memory.lastGood?.revision ?? "";
  setConditions(memory, revision, {
    Ready: { status: "False", reason, message },
    Reconciling: { status: "False", reason, message },
    Stalled: { status: "False", reason, message },
  });
  delete memory.lastError;
  return { action, result: "success", health, outcome: { kind: "done" } };
}

/**
 * A launch called off (see call-off.ts) before `action` or during the staging: nothing of the
 * revision was launched. The next pass starts at once (the daemon's next start, when it stops).
 */
export function calledOff(memory: ClusterMemory, revision: string, action: string, signal: AbortSignal): Verdict {
  const cause: unknown = signal.reason;
  const reason = cause instanceof LaunchCalledOff ? cause.reason : "Superseded";
  const why = cause instanceof Error ? cause.message : "its definition changed";
  const next = reason === "DaemonStopping" ? "the daemon's next start takes it up again" : "the next pass takes that up now";
  const message = `stopped launching revision ${revision.slice(0, 12)} at the ${action} step: ${why}; ${next}`;
  // Called off before the replace step, the launch that ran still serves, and Ready stands.
  const serving = readyStands(memory);
  const stalled = isStalled(memory);
  setConditions(memory, revision, {
    ...(serving ? {} : { Ready: { status: "False", reason, message } }),
    Reconciling: { status: "True", reason, message },
    // No longer "launching": what comes next says itself.
    ...(stalled ? {} : { Stalled: { status: "False", reason, message } }),
  });
  // Cut off from the cluster (Ready Unknown), what serves is not seen serving: Degraded, not Healthy.
  return { action, result: "waiting", reason, health: serving ? (isServing(memory) ? "Healthy" : "Degraded") : "Progressing", outcome: { kind: "requeue", afterMs: 0 } };
}

/** Terminal: wait for the definition to change. Whatever runs keeps running. */
export function stall(memory: ClusterMemory, action: string, reason: ConditionReason, message: string, serving: boolean): Verdict {
  const revision = memory.lastGood?.revision ?? "";
  setConditions(memory, revision, {
    Stalled: { status: "True", reason, message },
    Reconciling: { status: "False", reason, message },
    ...(serving ? {} : { Ready: { status: "False", reason, message } }),
  });
  memory.lastError = { reason, message, at: new Date().toISOString() };
  return { action, result: "stalled", reason, health: serving ? "Degraded" : "Stalled", outcome: { kind: "stall" } };
}

/** A failed pass: terminal errors stall, the others retry with back-off. */
export function failed(memory: ClusterMemory, error: unknown, action: string): Verdict {
  const reason = isShardctlError(error) ? error.reason : "InternalError";
  const message = messageOf(error);
  // Terminal: stall. Whatever this daemon last saw serving keeps serving (and stays Ready).
  if (isShardctlError(error) && error.terminal) return stall(memory, action, reason, message, mayBeServing(memory));
  memory.lastError = { reason, message, at: new Date().toISOString() };
  // Ready stands while what it vouches for still serves: every step that touches a running launch
  // (replace, stop, a death) withdraws Ready first, so a pass that fails with Ready still True (an
  // edit whose plan could not be made: a node or the model source did not answer) failed before
  // the old revision was touched, and that revision still serves.
  // Stalled says the daemon goes on trying (not, say, the teardown a death began long ago), unless a
  // stall (a spent budget) already said it stopped.
  const stalledNow = isStalled(memory);
  setConditions(memory, memory.lastGood?.revision ?? "", {
    ...(readyStands(memory) ? {} : { Ready: { status: "False", reason, message } }),
    Reconciling: { status: "True", reason: "RetryingAfterError", message: `${reason}: ${message}` },
    ...(stalledNow
      ? {}
      : { Stalled: { status: "False" as const, reason: "RetryingAfterError" as const, message: `the daemon tries again after a back-off (${reason})` } }),
  });
  // A teardown retried after a death that spent the budget: what runs next is nothing, stalled.
  // A teardown that could not reach everything (a node lost with its stage) leaves a cluster that
  // does not serve and may still run in part: Unhealthy, as from its death on, not Progressing.
  const health = budgetSpent(memory) ? "Stalled" : reason === "TeardownIncomplete" ? "Unhealthy" : "Progressing";
  return { action, result: "failed", reason, health, outcome: { kind: "retry" } };
}

/**
 * What a stall on a spent restart budget says: the launches, the budget, the last failure the
 * evidence holds, and the two ways on.
 */
export function budgetExhaustedMessage(memory: ClusterMemory, budget: number, name: string): string {
  const last = memory.restarts?.evidence.at(-1);
  const cause = last === undefined ? "" : `; the last failure: ${last.reason}: ${last.message}`;
  return `launched ${memory.restarts?.count ?? 0} times at this revision (budget ${budget})${cause}. Fix the cause and edit the definition, or run \`shardctl reconcile ${name}\``;
}

/** The health of a cluster whose launch died: Stalled when it will not be relaunched, else Unhealthy. */
export function deathHealth(memory: ClusterMemory): "Stalled" | "Unhealthy" {
  return budgetSpent(memory) ? "Stalled" : "Unhealthy";
}

/**
 * The revision's restart budget is spent (a death said so, or the stall): nothing is relaunched.
 * A stall of an earlier revision does not count: a new one has a budget of its own.
 */
export function budgetSpent(memory: ClusterMemory): boolean {
  const revision = memory.restarts?.revision;
  return memory.conditions.some((c) => c.type === "Stalled" && c.status === "True" && c.reason === "RestartBudgetExhausted" && c.observedRevision === revision);
}

/** A new revision: plan again, with a fresh restart budget. */
export function onRevision(memory: ClusterMemory, revision: string): void {
  delete memory.planned;
  delete memory.recheckMs;
  if (memory.restarts?.revision !== revision) memory.restarts = { revision, count: 0, evidence: [] };
  delete memory.lastError;
}

/** This daemon has seen `entry` serve: remembered with the moment it was first seen so. */
export function markSeenServing(memory: ClusterMemory, entry: Pick<LedgerEntry, "startedAt">): void {
  if (memory.servingSeen?.launch === entry.startedAt) return;
  memory.servingSeen = { launch: entry.startedAt, since: Date.now() };
}

/**
 * Running at the desired revision, as `observation` (this pass's probes) saw it: the runtime
 * conditions say what the probes found, and Ready is withdrawn when they found it not serving (a
 * stage's port refused, the coordinator's /health answering anything but ready) — the health
 * monitor, which judges such findings over several probes, tears it down if they last. Without an
 * observation every condition is True. `held` are conditions another view holds (a node the
 * supervision cannot observe), set with these rather than after them, so the probes' word does not
 * restart their transition time. Returns the health to report, or undefined when a death of
 * this launch was recorded meanwhile (the monitor saw it while the pass probed): that status was
 * written and stands, and nothing is changed.
 */
export function markRunning(
  memory: ClusterMemory,
  revision: string,
  entry: LedgerEntry,
  observation?: ClusterObservation,
  held: ConditionUpdates = {},
): Health | undefined {
  if (memory.deathRecordedFor === entry.startedAt) return undefined;
  const url = entry.coordinatorUrl ?? "";
  const stages = stagesListening(entry, observation);
  const coordinator = coordinatorHealthy(url, observation);
  const notServing = [stages, coordinator].filter((c) => c.status === "False");
  // A probe without an answer does not withdraw Ready from a launch this daemon has seen serve (a
  // busy moment is no fault; the monitor judges silences over several probes). A launch it found
  // running (a daemon restarted beside a frozen coordinator) has not shown it serving yet: Ready is
  // Unknown until every probe answers once.
  const unconfirmed = memory.servingSeen?.launch === entry.startedAt ? [] : [stages, coordinator].filter((c) => c.status === "Unknown");
  if (observation !== undefined && notServing.length === 0 && unconfirmed.length === 0) markSeenServing(memory, entry);
  const staged = memory.conditions.find((c) => c.type === "Staged" && c.status === "True" && c.observedRevision === revision);
  const stagedHere = staged === undefined ? undefined : { status: "True" as const, reason: "AllNodesPresent" as const, message: staged.message };
  setConditions(memory, revision, {
    Ready:
      notServing.length > 0
        ? {
            status: "False",
            reason: notServing[0]!.reason,
            message: `${notServing.map((c) => c.message).join("; ")}: torn down and relaunched if it lasts`,
          }
        : unconfirmed.length > 0
          ? {
              status: "Unknown",
              reason: unconfirmed[0]!.reason,
              message: `found running, not yet seen serving: ${unconfirmed.map((c) => c.message).join("; ")}`,
            }
          : { status: "True", reason: "ClusterReady", message: `serving at ${url}` },
    Reconciling: { status: "False", reason: "Converged", message: "running at the desired revision" },
    Stalled: { status: "False", reason: "Converged", message: "running at the desired revision" },
    // The staging's own words when this revision was staged by this daemon (bytes moved, nodes repaired).
    Staged: stagedHere ?? { status: "True", reason: "AllNodesPresent", message: "the model is present on every node" },
    StagesListening: stages,
    CoordinatorHealthy: coordinator,
    Registered:
      entry.routerBackend === undefined
        ? {
            status: "False",
            reason: "NotRegistered",
            message:
              memory.lastGood?.spec.router.register === false
                ? "router registration is off: [router] register = false in the definition"
                : 'no router to register with: [router] kind = "none" in shardctl.toml (the default); set kind = "continuum" and its config there to register clusters',
          }
        : { status: "True", reason: "BackendRegistered", message: `backend "${entry.routerBackend}"` },
    ...held,
  });
  const health: Health = notServing.length > 0 ? "Unhealthy" : (observation?.health ?? "Healthy");
  if (health === "Healthy") delete memory.lastError;
  return health;
}

/**
 * A pass that found the launch it adopted or started already dying: the death's status (written
 * when the monitor saw it) stands, and the end of its teardown asks for the next pass.
 */
export function dying(memory: ClusterMemory): Verdict {
  const reason = memory.lastError?.reason;
  return { action: "none", result: "waiting", ...(reason === undefined ? {} : { reason }), health: deathHealth(memory), outcome: { kind: "done" } };
}

/**
 * Look again soon at a cluster that runs but did not look Healthy: the status follows within 5 s
 * when a doubtful probe clears, rather than at the next resync. A cluster that stays so (a node
 * whose SSH is lost, a router that does not answer) is looked at less and less often — 5, 10,
 * 20 … s, at most a minute — since each look probes its nodes and asks the router.
 */
export function recheckUnlessHealthy(memory: ClusterMemory, health: Health): PassOutcome {
  if (health === "Healthy") {
    delete memory.recheckMs;
    return { kind: "done" };
  }
  const afterMs = memory.recheckMs ?? firstRecheckMs;
  memory.recheckMs = Math.min(lastRecheckMs, afterMs * 2);
  return { kind: "requeue", afterMs };
}

/** The first and the longest wait before a running cluster that did not look Healthy is looked at again, ms. */
const firstRecheckMs = 5_000;
const lastRecheckMs = 60_000;

/** StagesListening from the stage cards: False for a process gone or a refused port, Unknown for a probe without an answer. */
function stagesListening(entry: LedgerEntry, observation: ClusterObservation | undefined): ConditionUpdate {
  const cards = observation?.stages ?? [];
  const label = (s: (typeof cards)[number]): string => `stage-${s.index} on ${s.node}`;
  const gone = cards.filter((s) => s.liveness === "gone");
  if (gone.length > 0) return { status: "False", reason: "StageDied", message: gone.map((s) => `${label(s)}: pid ${s.pid ?? "?"} is no longer running`).join("; ") };
  const closed = cards.filter((s) => s.transport === "closed");
  if (closed.length > 0) {
    return { status: "False", reason: "StagePortClosed", message: closed.map((s) => `${label(s)}: transport ${s.address ?? "port"} refused`).join("; ") };
  }
  const unanswered = cards.filter((s) => s.transport === "unknown");
  if (unanswered.length > 0) {
    // The ports are probed from the coordinator's node, over SSH: its own silence leaves them unanswered too.
    const prober = entry.processes.find((p) => p.role === "coordinator")?.node;
    const from = prober === undefined ? "" : ` (probed from ${prober}, which may itself not answer)`;
    return {
      status: "Unknown",
      reason: "ProbeUnanswered",
      message: `${unanswered.map((s) => `${label(s)}: transport ${s.address ?? "port"} did not answer within the probe's deadline`).join("; ")}${from}`,
    };
  }
  return { status: "True", reason: "AllStagesListening", message: `${entry.processes.filter((p) => p.role === "stage").length} stages listening` };
}

/** CoordinatorHealthy from the coordinator's card: False unless /health answers ready, Unknown without an answer. */
function coordinatorHealthy(url: string, observation: ClusterObservation | undefined): ConditionUpdate {
  const card = observation?.coordinator ?? { health: "ok" as const };
  if (card.health === "ok") return { status: "True", reason: "HealthOk", message: `${url}/health answers 200` };
  if (card.health === "unknown") return { status: "Unknown", reason: "ProbeUnanswered", message: `${url}/health did not answer within the probe's deadline` };
  return { status: "False", reason: "CoordinatorUnhealthy", message: `${url}/health is ${healthInWords(card)}` };
}

/**
 * Nothing runs: the runtime conditions say so. With `stopping`, what ran is being stopped (its
 * processes may run for the teardown's grace period yet): said so, not "no stage runs". Members in
 * `stopping.gone` (`stage-1`, `coordinator`: a death's, seen exited) are said gone rather than being stopped.
 */
export function clearRuntime(memory: ClusterMemory, revision: string, stopping?: { message: string; gone?: readonly string[] }): void {
  setConditions(memory, revision, stopping === undefined ? notRunning : beingStopped(stopping.message, stopping.gone ?? []));
  delete memory.observation;
  // The next launch's looks start again at the shortest wait.
  delete memory.recheckMs;
}

const notRunning: ConditionUpdates = {
  StagesListening: { status: "False", reason: "NotRunning", message: "no stage runs" },
  CoordinatorHealthy: { status: "False", reason: "NotRunning", message: "no coordinator runs" },
  Registered: { status: "False", reason: "NotRunning", message: "not registered" },
};

/** The runtime conditions of a teardown under way, after `message` ("tearing down revision …"). */
function beingStopped(message: string, gone: readonly string[]): ConditionUpdates {
  const stages = gone.filter((label) => label.startsWith("stage-"));
  const stagesWords =
    stages.length === 0 ? "the stages are being stopped" : `${stages.join(", ")} ${stages.length === 1 ? "is" : "are"} gone, any other stage is being stopped`;
  return {
    StagesListening: { status: "False", reason: "TearingDown", message: `${message}: ${stagesWords}` },
    CoordinatorHealthy: {
      status: "False",
      reason: "TearingDown",
      message: `${message}: the coordinator ${gone.includes("coordinator") ? "is gone" : "is being stopped"}`,
    },
    Registered: { status: "False", reason: "TearingDown", message: `${message}: its router entry is removed first` },
  };
}

/** Conditions to set at once, by type. */
export type ConditionUpdates = Partial<Record<ConditionType, ConditionUpdate>>;

/** Set several conditions at once, at `revision`. */
export function setConditions(memory: ClusterMemory, revision: string, updates: ConditionUpdates): void {
  const now = new Date();
  for (const [type, update] of Object.entries(updates) as Array<[ConditionType, ConditionUpdate]>) {
    memory.conditions = setCondition(memory.conditions, type, update, revision, now);
  }
}

/** Last errors that were no failed attempt to serve: what the definition or the budget said. */
const notAttempts: ReadonlySet<string> = new Set([
  "InvalidDefinition",
  "DefinitionUnreadable",
  "DefinitionsDirMissing",
  "MassPruneRefused",
  "RestartBudgetExhausted",
  "ClusterOwnedElsewhere",
]);

/**
 * Ready while a pass stages or launches: nothing serves this revision yet. A pass that tries again
 * after a failure at this revision (a held port, a death, a node that did not answer) says so with
 * that failure, so a status read during the retry does not look like a first attempt, and the
 * failure stays in view while the retry runs rather than only between retries.
 */
export function notServingYet(memory: ClusterMemory, reason: "Staging" | "Launching", doing?: string): ConditionUpdate {
  const last = memory.lastError;
  // Only a failure of an attempt: a stall lifted by a fix or by `shardctl reconcile` is no attempt
  // that failed. Its first line only: a message may list many issues.
  const attempt = last !== undefined && !notAttempts.has(last.reason);
  const again = attempt ? ` (again, after ${last.reason}: ${last.message.split("\n")[0]})` : "";
  return { status: "False", reason, message: `nothing serves this revision yet${doing === undefined ? "" : `: ${doing}`}${again}` };
}

/** Ready at the last revision this daemon saw (or a status says so): something serves, whatever this pass could not do. */
export function isServing(memory: Pick<ClusterMemory, "conditions">): boolean {
  return memory.conditions.some((c) => c.type === "Ready" && c.status === "True");
}

/** Stalled True: a stall stands (a spent budget, an invalid definition) and says the daemon stopped trying. */
export function isStalled(memory: Pick<ClusterMemory, "conditions">): boolean {
  return memory.conditions.some((c) => c.type === "Stalled" && c.status === "True");
}

/**
 * Ready as it stands, for a pass that fails or is called off before it touched what runs: True, or
 * Unknown while the daemon is cut off from the cluster (DaemonCutOff), which it may serve all along.
 */
function readyStands(memory: Pick<ClusterMemory, "conditions">): boolean {
  return memory.conditions.some((c) => c.type === "Ready" && (c.status === "True" || (c.status === "Unknown" && c.reason === "DaemonCutOff")));
}

/** Ready, or found running and not yet seen serving (Ready Unknown): something may serve. */
export function mayBeServing(memory: ClusterMemory): boolean {
  return memory.conditions.some((c) => c.type === "Ready" && c.status !== "False");
}

/** One more launch timeline event (the last 50 are kept). */
export function recordEvent(memory: ClusterMemory, event: TimelineEvent): void {
  memory.timeline = [...memory.timeline, event].slice(-50);
}
