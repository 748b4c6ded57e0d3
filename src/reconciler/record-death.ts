/**
 * A launch that lost a process is recorded once, the moment it is known — whether the health
 * monitor saw the exit or a pass found the process gone first (the two race when a pass is under
 * way at the kill): Ready withdrawn with the cause, the evidence kept against the restart budget,
 * the status file written, all before the teardown runs. The dead process's log tail and exit
 * status are added once the teardown has ended.
 */
import { describeExit, processLabel, readLogTail, within, type LedgerEntry } from "../launch/index.js";
import type { DeathEvent } from "../health/index.js";
import { defaultRelaunchMarkMs } from "../router/index.js";
import type { ClusterMemory } from "./cluster-memory.js";
import type { Pass } from "./pass.js";
import { clearRuntime, setConditions } from "./verdicts.js";

export type RestartEvidence = NonNullable<ClusterMemory["restarts"]>["evidence"][number];

/**
 * Say at once what died: Ready=False with the cause, the evidence, the status file. Returns the
 * evidence to complete later, or undefined when this launch's death is already recorded (or no
 * restart budget is being counted, as for a launch adopted without one).
 */
export function recordDeath(pass: Pass, entry: LedgerEntry, death: DeathEvent): RestartEvidence | undefined {
  const { memory, world, settings } = pass;
  if (memory.deathRecordedFor === entry.startedAt) return undefined;
  memory.deathRecordedFor = entry.startedAt;
  markRelaunching(pass, entry);
  const message = `${death.label} on ${death.node}: ${death.detail}`;
  const evidence: RestartEvidence = { at: death.at, reason: death.reason, message, logTail: [] };
  if (memory.restarts !== undefined) memory.restarts.evidence = [...memory.restarts.evidence, evidence].slice(-5);
  memory.lastError = { reason: death.reason, message, at: death.at };
  const revision = memory.lastGood?.revision ?? entry.revision;
  setConditions(memory, revision, {
    Ready: { status: "False", reason: death.reason, message },
    Reconciling: { status: "True", reason: "TearingDown", message: `tearing the cluster down after ${message}` },
  });
  clearRuntime(memory, revision);
  void world.writeStatus(entry.cluster, memory, { action: "none", result: "waiting", reason: death.reason, health: "Unhealthy" }, settings);
  return memory.restarts === undefined ? undefined : evidence;
}

/**
 * The death a pass found: of the processes it saw gone, the one that ended by a signal is blamed
 * first (its peers exit with a status when their pipeline breaks), else the first gone.
 */
export async function deathFoundByPass(pass: Pass, entry: LedgerEntry, gone: readonly string[]): Promise<DeathEvent | undefined> {
  const candidates = entry.processes.filter((p) => gone.includes(processLabel(p.role, p.index)));
  if (candidates.length === 0) return undefined;
  const exits = await Promise.all(candidates.map((p) => within(evidenceDeadlineMs, describeExit(pass.world.nodeFor(p.node, pass.settings), p), "")));
  const blamed =
    candidates[
      Math.max(
        0,
        exits.findIndex((e) => e.startsWith("killed by")),
      )
    ]!;
  return {
    cluster: entry.cluster,
    label: processLabel(blamed.role, blamed.index),
    node: blamed.node,
    reason: blamed.role === "stage" ? "StageDied" : "CoordinatorDied",
    detail: `pid ${blamed.pid} is no longer running`,
    at: new Date().toISOString(),
  };
}

/** Add the dead process's last log lines and how it ended (exit status or signal, from its wrapper). */
export async function completeEvidence(pass: Pass, entry: LedgerEntry, label: string, evidence: RestartEvidence | undefined): Promise<void> {
  if (evidence === undefined) return;
  const process = entry.processes.find((p) => processLabel(p.role, p.index) === label);
  if (process === undefined) return;
  const node = pass.world.nodeFor(process.node, pass.settings);
  // The dead process's node may be the unreachable one: its evidence is not worth waiting for (the
  // log tail bounds its own read, as a launch's failure does).
  const [logTail, exit] = await Promise.all([readLogTail(node, process), within(evidenceDeadlineMs, describeExit(node, process), undefined)]);
  evidence.logTail = logTail;
  if (exit !== undefined) evidence.message = `${evidence.message} (${exit})`;
}

/** How long the evidence of a death is waited for, ms (readLogTail bounds its read at the same 2 s). */
const evidenceDeadlineMs = 2_000;

/**
 * While a registered cluster is torn down and relaunched, the router answers its model with 503 and
 * Retry-After (clients retry) instead of 404 (they give up). Marked synchronously, before the
 * teardown deregisters the backend, and only when the restart budget has a launch left.
 */
function markRelaunching(pass: Pass, entry: LedgerEntry): void {
  const { memory, settings } = pass;
  const model = memory.lastGood?.spec.model.id;
  const relaunches = memory.restarts === undefined || memory.restarts.count < settings.daemon.restartBudget;
  if (entry.routerBackend === undefined || model === undefined || !relaunches) return;
  void markComingBack(pass, model);
}

/** Mark `model` as coming back in the router (503 + Retry-After until it is registered again or the mark expires); best effort. */
export async function markComingBack(pass: Pass, model: string): Promise<void> {
  const { world, settings } = pass;
  await world
    .registrarFor(settings)
    .markRelaunching(model, Date.now() + defaultRelaunchMarkMs)
    .catch((error: unknown) => world.log.warn({ cluster: pass.name, err: error }, "could not mark the model as coming back"));
}
