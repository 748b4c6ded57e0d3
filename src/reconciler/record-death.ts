/**
 * A launch that lost a process is recorded once, the moment it is known — whether the health
 * monitor saw the exit or a pass found the process gone first (the two race when a pass is under
 * way at the kill): Ready withdrawn with the cause, the evidence kept against the restart budget,
 * the status file written, all before the teardown runs. The cause is the member that went first:
 * a peer seen exiting before it, because its link to it closed, is named after it as what followed
 * (the monitor judges that before it reports the death, a pass in death-found-by-pass.ts). Then,
 * alongside the teardown, the dead process's own evidence is read (its exit status and last log
 * lines, bounded at 2 s): when it names a peer that went silent (an engine that says so, as
 * shard-engine does), the record names that peer first — the member that stopped answering, not the
 * one that exited because of it — and the status file is written again. Once the teardown has ended the evidence is read once more
 * (a process killed by the teardown has its exit status only then).
 */
import { engineOf, defaultEngineKind } from "../engines/index.js";
import { askExit, processLabel, readLogTail, type LedgerEntry } from "../launch/index.js";
import { within } from "../nodes/index.js";
import type { Reason } from "../errors/index.js";
import { describeDeath, type DeathEvent } from "../health/index.js";
import { markComingBack } from "./coming-back.js";
import { noteGone, type ClusterMemory } from "./cluster-memory.js";
import { giveBudgetBackAfterService } from "./give-budget-back.js";
import type { Pass } from "./pass.js";
import { budgetExhaustedMessage, clearRuntime, deathHealth, setConditions } from "./verdicts.js";

export type RestartEvidence = NonNullable<ClusterMemory["restarts"]>["evidence"][number];

/** A death as recorded: the message it was written with, and the evidence kept against the budget. */
export interface RecordedDeath {
  death: DeathEvent;
  /** The message Ready, lastError and the evidence carry until the evidence is read. */
  message: string;
  /** Undefined when no restart budget is counted (a launch adopted without one). */
  evidence: RestartEvidence | undefined;
  /** What Stalled and lastError say when the death spent the revision's budget. */
  stalled: string | undefined;
  /** The reason the record carries: the death's, then that of the member its evidence names first. */
  reason: Reason;
}

/**
 * Say at once what died: Ready=False with the cause, the evidence, the status file. Returns the
 * record to explain later, or undefined when this launch's death is already recorded.
 */
export function recordDeath(pass: Pass, entry: LedgerEntry, death: DeathEvent): RecordedDeath | undefined {
  const { memory, world, settings } = pass;
  if (memory.deathRecordedFor === entry.startedAt) return undefined;
  memory.deathRecordedFor = entry.startedAt;
  world.noteDeath(entry.cluster, death.reason);
  noteGone(memory, entry.startedAt, death.gone ?? []);
  giveBudgetBackAfterService(pass, entry.startedAt, Date.parse(death.at));
  markRelaunching(pass, entry);
  // A process seen exiting is said at once, before anyone knows why: it may have exited because a
  // peer went silent (the culprit then, named once the evidence is read, seconds later).
  const message = `${describeDeath(death)}${endedAtDeath(death) ? causeBeingRead : ""}`;
  const evidence: RestartEvidence = { at: death.at, reason: death.reason, message, logTail: [] };
  if (memory.restarts !== undefined) memory.restarts.evidence = [...memory.restarts.evidence, evidence].slice(-5);
  const revision = memory.lastGood?.revision ?? entry.revision;
  // Whether it comes back by itself is known now, not once the teardown ends (a cut-off node can
  // hold that for minutes): with the revision's budget spent, it is stalled from the death on.
  const restarts = memory.restarts?.revision === entry.revision ? memory.restarts : undefined;
  const budget = settings.daemon.restartBudget;
  const spent = restarts !== undefined && restarts.count >= budget;
  const stalled = spent ? budgetExhaustedMessage(memory, budget, entry.cluster) : undefined;
  memory.lastError = stalled === undefined ? { reason: death.reason, message, at: death.at } : { reason: "RestartBudgetExhausted", message: stalled, at: death.at };
  setConditions(memory, revision, {
    Ready: { status: "False", reason: death.reason, message },
    Reconciling: { status: "True", reason: "TearingDown", message: tearingDownAfter(message) },
    Stalled:
      stalled === undefined
        ? { status: "False", reason: "TearingDown", message: `relaunched once torn down (launch ${(restarts?.count ?? 0) + 1} of ${budget} at this revision)` }
        : { status: "True", reason: "RestartBudgetExhausted", message: stalled },
  });
  // The survivors run until the teardown stops them (a grace period, or a node that does not answer).
  const gone = death.gone ?? (endedAtDeath(death) ? [death.label] : []);
  clearRuntime(memory, revision, { message: `tearing down revision ${entry.revision.slice(0, 12)} (${death.reason}: ${death.label})`, gone });
  void world.writeStatus(entry.cluster, memory, { action: "none", result: "waiting", reason: death.reason, health: deathHealth(memory) }, settings);
  return { death, message, evidence: memory.restarts === undefined ? undefined : evidence, stalled, reason: death.reason };
}

/** What the first record of an exit adds until its evidence is read. */
const causeBeingRead = " (why is being read: its exit status, and its peers' logs)";

function tearingDownAfter(message: string): string {
  return `tearing the cluster down after ${message}`;
}

/** How long after a death a member named silent is asked again, ms: the two ends of a cut link report each other up to about two heartbeats (500 ms each) apart. */
const linkSkewMs = 1_200;

/**
 * Read what the dead process left (its last log lines, and how it ended once it has ended) and say
 * it: in the evidence, and — while nothing newer has replaced them — in Ready, Reconciling and
 * lastError. `phase` "at-death" runs alongside the teardown and writes the status file when the
 * record changed; "after-teardown" completes the evidence for the pass that follows to write.
 */
export async function explainDeath(pass: Pass, entry: LedgerEntry, recorded: RecordedDeath | undefined, phase: "at-death" | "after-teardown"): Promise<void> {
  if (recorded === undefined) return;
  // A newer launch of the cluster is watched already (a pass relaunched while this one's evidence
  // was read): its processes write the same log and exit files, which say nothing of this death.
  if (phase === "after-teardown" && pass.memory.supervision !== undefined && pass.memory.supervision.startedAt !== entry.startedAt) return;
  const { death } = recorded;
  const process = entry.processes.find((p) => processLabel(p.role, p.index) === death.label);
  if (process === undefined) return;
  const node = pass.world.nodeFor(process.node, pass.settings);
  // A process not seen exiting (an unhealthy coordinator, a closed port) still ran at the death: its
  // exit status, if any, is the teardown's doing and is read only after it.
  const ended = phase === "after-teardown" || endedAtDeath(death);
  // The dead process's node may be the unreachable one: its evidence is not worth waiting for (the
  // log tail bounds its own read, as a launch's failure does).
  // Every member's log is read, not the dead one's alone: the peer that went silent may have been
  // reported by another (an unhealthy coordinator is judged before it has seen the silence itself,
  // the stage that exited because of it has). Each read is bounded at 2 s, all at once.
  const [tails, logTail, exit] = await Promise.all([
    Promise.all(
      entry.processes
        .filter((p) => p !== process)
        .map(async (p) => ({ label: processLabel(p.role, p.index), tail: await readLogTail(pass.world.nodeFor(p.node, pass.settings), p) })),
    ),
    readLogTail(node, process),
    ended ? within(evidenceDeadlineMs, askExit(node, process), undefined) : Promise.resolve(undefined),
  ]);
  // An exit status read is an end: the member is gone, and a slow node must not draw it back in doubt.
  if (exit?.known === true) noteGone(pass.memory, entry.startedAt, [death.label]);
  let reports = [{ label: death.label, tail: logTail }, ...tails];
  // Both ends of a cut link report each other, up to a heartbeat or two apart (500 ms each): a
  // member named silent at the death is asked again once that skew has passed, and one that has
  // reported a silent peer meanwhile was not silent itself (nobody is named then).
  const named = phase === "at-death" ? silentPeerReport(entry, death, reports) : undefined;
  const namedProcess = named === undefined ? undefined : entry.processes.find((p) => processLabel(p.role, p.index) === named.peer);
  if (namedProcess !== undefined && namedProcess !== process) {
    await new Promise((resolve) => setTimeout(resolve, linkSkewMs));
    const again = await readLogTail(pass.world.nodeFor(namedProcess.node, pass.settings), namedProcess);
    reports = reports.map((r) => (r.label === named!.peer ? { label: r.label, tail: again } : r));
  }
  // The exit of a process that was running at the death is the teardown's doing, not the fault's;
  // an end its node could not tell is no one's doing yet.
  const message = explanation(entry, death, reports, exit === undefined || endedAtDeath(death) || !exit.known ? exit?.words : `at the teardown: ${exit.words}`);
  const { evidence } = recorded;
  const reason = culpritReason(recorded.reason, message);
  // The status file is written again at the death only when the words changed (a silent peer
  // named, an exit status learnt): the log tail alone waits for the pass that follows the teardown.
  const reworded = message !== recorded.message || reason !== recorded.reason;
  let changed = false;
  if (evidence !== undefined) {
    if (logTail.length > 0) evidence.logTail = logTail;
    if (evidence.message !== message || evidence.reason !== reason) changed = true;
    evidence.message = message;
    evidence.reason = reason;
  }
  const { memory } = pass;
  // Only the words of this death's record are replaced: a pass that moved on (relaunching, stalled)
  // wrote its own, which quote the record's message as it was then.
  if (reworded && memory.lastError?.message === recorded.message) {
    memory.lastError = { ...memory.lastError, reason, message };
    changed = true;
  }
  // A stall on the spent budget quotes the death: said again with the evidence's new words.
  if (reworded && recorded.stalled !== undefined && memory.lastError?.message === recorded.stalled) {
    const stalled = budgetExhaustedMessage(memory, pass.settings.daemon.restartBudget, entry.cluster);
    memory.lastError = { ...memory.lastError, message: stalled };
    const condition = memory.conditions.find((c) => c.type === "Stalled");
    if (condition?.message === recorded.stalled)
      setConditions(memory, memory.lastGood?.revision ?? entry.revision, { Stalled: { status: "True", reason: "RestartBudgetExhausted", message: stalled } });
    recorded.stalled = stalled;
    changed = true;
  }
  // The launch timeline's record of this death too, so that it names the same member.
  // (The supervision wrote it with the death's first words, before this record added anything.)
  const isFirstWording = (e: (typeof memory.timeline)[number]): boolean => e.step === "cluster-unhealthy" && e.at === death.at;
  if (reworded && memory.timeline.some(isFirstWording)) {
    memory.timeline = memory.timeline.map((e) => (isFirstWording(e) ? { ...e, detail: `${reason}: ${message}` } : e));
    changed = true;
  }
  const ready = memory.conditions.find((c) => c.type === "Ready");
  if (reworded && memory.deathRecordedFor === entry.startedAt && ready?.status === "False" && ready.message === recorded.message) {
    const revision = memory.lastGood?.revision ?? entry.revision;
    setConditions(memory, revision, { Ready: { status: "False", reason, message } });
    // Reconciling too, but only while it still says this teardown: a pass may be relaunching already.
    const reconciling = memory.conditions.find((c) => c.type === "Reconciling");
    if (reconciling?.message === tearingDownAfter(recorded.message)) {
      setConditions(memory, revision, { Reconciling: { status: "True", reason: "TearingDown", message: tearingDownAfter(message) } });
    }
    changed = true;
  }
  recorded.message = message;
  recorded.reason = reason;
  if (phase === "at-death" && changed) {
    await pass.world.writeStatus(entry.cluster, memory, { action: "none", result: "waiting", reason, health: deathHealth(memory) }, pass.settings);
  }
}

/**
 * A death of a process (StageDied, CoordinatorDied) is the death of the member its words name
 * first, once the evidence has named the one that went first: a coordinator that stopped answering
 * is a CoordinatorDied, whichever member's exit was seen first. Other reasons stand.
 */
function culpritReason(reason: Reason, message: string): Reason {
  if (reason !== "StageDied" && reason !== "CoordinatorDied") return reason;
  const first = /^(stage-\d+|coordinator) on /.exec(message)?.[1];
  if (first === undefined) return reason;
  return first === "coordinator" ? "CoordinatorDied" : "StageDied";
}

/** Whether the death was the process's own end (seen exiting), so its exit status says how it died. */
function endedAtDeath(death: DeathEvent): boolean {
  return death.reason === "StageDied" || death.reason === "CoordinatorDied";
}

/**
 * The death in words. When the members' logs name one peer that went silent (an engine that says
 * so), that peer comes first: it stopped answering, and the dead process exited (or its pipeline
 * broke) because of it. A member that reported a silent peer was not silent itself, nor was one
 * another member still heard as its pipeline broke, so the two ends of a cut between their nodes
 * name nobody (the dead process's own words of the peer it stopped hearing are kept, blaming no
 * one); nor does an engine that never says: what the dead process did is then all that is known.
 * The members seen exiting because of the death (their link to it closed) follow its own words.
 */
export function explanation(entry: LedgerEntry, death: DeathEvent, logs: ReadonlyArray<{ label: string; tail: readonly string[] }>, exit: string | undefined): string {
  // "pid 4242 exited … (with status 69)": not "exited" twice.
  const how = exit === undefined ? "" : ` (${/\bexited\b/.test(death.detail) ? exit.replace(/^exited /, "") : exit})`;
  const report = silentPeerReport(entry, death, logs);
  if (report === undefined) return describeDeath({ ...death, detail: `${death.detail}${ownSilentPeerWords(entry, death, logs)}` }, how);
  const name = report.peer;
  const peer = entry.processes.find((p) => processLabel(p.role, p.index) === name);
  const who = peer === undefined ? name : `${name} on ${peer.node}`;
  const link = report.link === "stage" ? `link to ${name}` : report.link;
  const because = report.reporter === death.label ? ` because its ${link} went silent` : "";
  return `${who} stopped answering (${report.reporter} heard nothing from it for ${report.silentMs} ms); ${describeDeath({ ...death, detail: `${death.detail}${because}` }, how)}`;
}

/**
 * What the dead process said of a peer it stopped hearing, when the evidence names no member as the
 * one that went silent (another member still heard that peer: a link cut one way, or between two
 * members only): its own words, blaming nobody. Empty when it said none, or when the daemon heard
 * nothing from it either (cut off, it stops hearing every peer).
 */
function ownSilentPeerWords(entry: LedgerEntry, death: DeathEvent, logs: ReadonlyArray<{ label: string; tail: readonly string[] }>): string {
  if (death.unheard === true) return "";
  const tail = logs.find((l) => l.label === death.label)?.tail;
  const said = tail === undefined ? undefined : engineOf(entry.engine ?? defaultEngineKind).silentPeerIn?.(tail);
  if (said === undefined) return "";
  const link = said.link === "stage" ? `link to ${said.peer}` : said.link;
  return `, saying its ${link} went silent (nothing from ${said.peer} for ${said.silentMs} ms; the other members' words do not show ${said.peer} stopped answering: the link between them may be what failed: cut, or passing only small packets, as a path-MTU black hole does — ping, SSH and small frames get through, activations and the links' padded heartbeats do not; try \`ping -M do -s 1472\` between their nodes)`;
}

/**
 * The report naming the one member that went silent, if the logs name exactly one that reported
 * nothing itself and that no member heard from as its pipeline broke. A member the daemon itself
 * heard nothing from (`death.unheard`: the path to its node is cut) is not heard as a witness: cut
 * off, it stops hearing every peer, healthy or not, and reports the first whose silence outlasts its
 * bound — after the teardown has stopped the others before they could say anything of their own.
 * Nor is a member on a node behind a path that came and went (`death.flakyNodes`, a lossy link):
 * its peers' words were dropped on its own path, and it blamed a member on a healthy host.
 */
export function silentPeerReport(entry: LedgerEntry, death: DeathEvent, logs: ReadonlyArray<{ label: string; tail: readonly string[] }>) {
  const { silentPeerIn, answeringPeersIn } = engineOf(entry.engine ?? defaultEngineKind);
  const flaky = new Set(death.flakyNodes ?? []);
  const onFlakyNode = (label: string): boolean => entry.processes.some((p) => processLabel(p.role, p.index) === label && flaky.has(p.node));
  const witnesses = logs.filter(({ label }) => !(death.unheard === true && label === death.label) && !onFlakyNode(label));
  const reports = witnesses.flatMap(({ label, tail }) => {
    const report = silentPeerIn?.(tail);
    return report === undefined ? [] : [{ reporter: label, ...report }];
  });
  const reporters = new Set(reports.map((r) => r.reporter));
  // Of the two ends of a cut between two members, the second seldom reaches its own liveness bound:
  // the pipeline's collapse after the first one's exit (the coordinator exiting, the teardown) ends
  // it first, and it never says the first went silent. A third member, which still heard it as the
  // pipeline broke, says so: a member heard then did not stop answering.
  const answering = new Set(logs.flatMap(({ tail }) => answeringPeersIn?.(tail) ?? []));
  const silent = new Set(reports.map((r) => r.peer).filter((peer) => !reporters.has(peer) && !answering.has(peer)));
  if (silent.size !== 1) return undefined;
  const [name] = silent;
  // The dead process's own report first, else the first member that made one.
  return reports.find((r) => r.peer === name && r.reporter === death.label) ?? reports.find((r) => r.peer === name)!;
}

/** How long the evidence of a death is waited for, ms (readLogTail bounds its read at the same 2 s). */
export const evidenceDeadlineMs = 2_000;

/**
 * While a registered cluster is torn down and relaunched, the router answers its model with 503 and
 * Retry-After (clients retry) instead of 404 (they give up). Marked synchronously, before the
 * teardown deregisters the backend, and only when a relaunch will come: the restart budget has a
 * launch left, and the definition neither suspends the cluster nor asks it stopped.
 */
function markRelaunching(pass: Pass, entry: LedgerEntry): void {
  const { memory, settings } = pass;
  const spec = memory.lastGood?.spec;
  const model = spec?.model.id;
  const relaunches = spec?.suspend !== true && spec?.desired !== "stopped" && (memory.restarts === undefined || memory.restarts.count < settings.daemon.restartBudget);
  if (entry.routerBackend === undefined || model === undefined || !relaunches) return;
  memory.comingBack = model;
  void markComingBack(pass, model);
}
