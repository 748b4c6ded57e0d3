/**
 * Observe what runs: the ledger's entry of this cluster and, when it is ours, its processes
 * (liveness, transport ports, the coordinator's /health). Only for a missing definition is the
 * rest of the directory looked at: the prune guard needs it.
 */
import { setTimeout as sleep } from "node:timers/promises";
import { observeCluster, type ClusterObservation } from "../../health/index.js";
import type { LedgerEntry } from "../../launch/index.js";
import { heldEntry, observedStateOf, readDirectoryView } from "../decision-inputs.js";
import type { Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import { noteGone, seenGoneOf } from "../cluster-memory.js";
import { isServing, setConditions } from "../verdicts.js";
import { giveBudgetBackAfterService } from "../give-budget-back.js";

export const observe: Step = {
  name: "observe",
  action: "none",
  failure: "ObserveFailed",
  async run(pass) {
    const entry = await ownEntry(pass, (await pass.ledger.read(pass.name)) ?? (await restoreLostEntry(pass)));
    const watched = pass.memory.supervision;
    if (entry !== undefined && watched?.startedAt === entry.startedAt) watched.entry = entry;
    const ours = entry !== undefined && pass.world.owns(entry);
    // Nothing of ours runs (the ledger has no launch of it: its state was lost, or it was never
    // launched here), yet a Ready carried over from the last status file vouches for it: withdrawn,
    // or a pass that then fails would keep it and `shardctl wait` would pass on a cluster that is down.
    if (!ours && isServing(pass.memory)) {
      setConditions(pass.memory, pass.memory.lastGood?.revision ?? "", {
        Ready: { status: "False", reason: "NotRunning", message: "nothing runs for this cluster: the ledger holds no launch of it" },
      });
    }
    if (entry !== undefined && ours) refundInterruptedLaunch(pass, entry);
    // A suspended definition takes no action: its processes need no probing. An invalid one keeps
    // the last valid one, whose launch is relaunched if a process of it is gone.
    const desired = pass.desired?.kind === "invalid" ? pass.desired.lastGood : pass.desired;
    const acting = desired?.kind === "defined" && !desired.suspend;
    if (entry !== undefined && ours && acting) pass.observation = await observeEntry(pass, entry);
    // A process of the running launch gone: whether the launch earned its budget back is judged
    // now, for the decision that follows counts its launches (the death is recorded by the monitor
    // or by the teardown's step, perhaps after that decision). Its service counts to when the look
    // began, not to its end (which waits seconds on the monitor): the death came before the probe
    // that found it, so this counts at most the time since the last look that saw it alive too
    // much, seconds against a reset period of minutes.
    const look = pass.observation;
    if (entry?.phase === "running" && look !== undefined && look.gone.length > 0) giveBudgetBackAfterService(pass, entry.startedAt, Date.parse(look.at));
    const absent = pass.desired?.kind === "absent" && entry !== undefined && ours;
    pass.entry = entry;
    pass.observed = observedStateOf(entry, pass.world.dir, {
      ...(pass.observation === undefined ? {} : { gone: pass.observation.gone }),
      ...(absent ? { directory: await readDirectoryView(pass.world.dir, pass.ledger, pass.settings) } : {}),
    });
  },
};

/**
 * The entry as this daemon holds it, its owner recorded as the directory the daemon watches, spelt
 * as it was given. An entry launched from a folder that no longer exists is taken over by the daemon
 * that defines the cluster (see heldEntry). One of this daemon's recorded under another name of its
 * directory (its real path, when the daemon now watches it through a symbolic link) is recorded
 * under the daemon's: a deployment that later switches the link to a new release keeps it.
 */
async function ownEntry(pass: Pass, entry: LedgerEntry | undefined): Promise<LedgerEntry | undefined> {
  if (entry === undefined || pass.desired === undefined || pass.desired.kind === "absent") return entry;
  const held = heldEntry(entry, pass.world.dir)!;
  // Rewritten only while nothing of this daemon supervises it (its first pass after a start): a
  // supervision's teardown writes the same entry, and an older copy must not land over its record.
  if (!pass.world.owns(held) || entry.owner === pass.world.dir || pass.memory.supervision !== undefined) return held;
  const owned = { ...held, owner: pass.world.dir };
  // Best effort: a state directory that takes no write now is tried again at the next pass, and a
  // launch records its owner anew.
  await pass.ledger.write(owned).catch((error: unknown) => pass.world.log.warn({ cluster: pass.name, err: error }, "could not record the cluster's owner in the ledger"));
  if (held !== entry)
    pass.world.log.warn(
      { cluster: pass.name, was: entry.owner, now: pass.world.dir },
      "the cluster was launched from a folder that no longer exists: this daemon, whose folder defines it, takes it over",
    );
  return owned;
}

/**
 * The ledger entry of a launch this daemon watches, written back when its file is gone while the
 * launch runs (the state directory removed under a running daemon: a `git clean -X` of a checkout
 * that holds it). Without its record the pass would launch again over processes that serve, and
 * stop them as leftovers. A launch whose death is recorded is being torn down: its entry goes on
 * purpose.
 */
async function restoreLostEntry(pass: Pass): Promise<LedgerEntry | undefined> {
  const watched = pass.memory.supervision;
  if (watched === undefined || pass.memory.deathRecordedFor === watched.startedAt) return undefined;
  // Asked once more just before: an entry written meanwhile (a second daemon's, in the gap a
  // removed lock leaves) is not written over.
  const meanwhile = await pass.ledger.read(pass.name);
  if (meanwhile !== undefined) return meanwhile;
  await pass.ledger.write(watched.entry);
  pass.world.log.warn(
    { cluster: pass.name, ledger: pass.ledger.dir },
    "the ledger entry of the launch this daemon watches was gone (was the state directory removed?): written again from what the daemon holds; what runs goes on",
  );
  return watched.entry;
}

/** Probe the processes of a ledger entry; the result is also the stage cards of the status file. */
export async function observeEntry(pass: Pass, entry: LedgerEntry) {
  const { memory } = pass;
  // Without a plan (one that could not be made: a node that cannot be probed) the last status's plan
  // of the same revision still says which layers each stage holds.
  const previousPlan = memory.status?.observedRevision === entry.revision ? memory.status.plan : undefined;
  // Only a plan of the launch's own revision: a new revision's (still stalled, say infeasible) may
  // split the layers otherwise, or into more stages, and would misstate what runs and its ranks.
  const planned = memory.planned?.revision === entry.revision ? memory.planned.plan : undefined;
  const layers = (planned ?? previousPlan)?.stages.map((s) => s.layers);
  const previous = memory.observation ?? inheritedObservation(memory.inheritedCards, entry);
  const deathBefore = memory.deathRecordedFor;
  const observation = await observeCluster(entry, {
    nodeFor: (n) => pass.world.nodeFor(n, pass.settings),
    ...(layers === undefined ? {} : { layers }),
    ...(previous === undefined ? {} : { previous }),
    knownGone: new Set(seenGoneOf(memory, entry.startedAt)),
    unanswering: new Set([...(memory.supervision?.unobservable?.keys() ?? []), ...(memory.supervision?.cutOff?.nodes ?? [])]),
  });
  noteGone(memory, entry.startedAt, observation.gone);
  // A death the monitor recorded while this look was out (a slow node makes a look take seconds)
  // cleared the cards: the look's, taken before it, would draw the dead processes alive again.
  if (memory.deathRecordedFor === deathBefore) memory.observation = observation;
  delete memory.inheritedCards;
  await letTheMonitorSpeakFirst(pass, entry, observation);
  return observation;
}

/**
 * A look that finds the launch not serving (a stage gone or refusing, the coordinator answering
 * anything but ready) has often caught the echo of a death: a stage killed a moment ago closes its
 * neighbours' links, they exit and the coordinator reports a broken pipeline, while the health
 * monitor is still judging which process went first (its exit watches see an exit within about
 * 100 ms; the judgement takes up to 2.5 s). The monitor's record names that cause, so the pass
 * gives it a moment: it waits while the monitor judges a death (up to `judgementWaitMs` from when
 * the judgement began), after looking for one to begin for `exitSeenWithinMs`. With no death seen
 * (a cut link, a coordinator that answers 503 while everything runs) its own finding is written
 * that much later. Once the death is recorded the pass stands aside (markRunning).
 */
async function letTheMonitorSpeakFirst(pass: Pass, entry: LedgerEntry, observation: ClusterObservation): Promise<void> {
  const { memory } = pass;
  if (memory.supervision?.startedAt !== entry.startedAt || !foundNotServing(observation)) return;
  const supervision = memory.supervision.supervision;
  const started = performance.now();
  let judgingSince: number | undefined;
  const recorded = (): boolean => memory.deathRecordedFor === entry.startedAt || memory.supervision?.supervision !== supervision;
  while (!recorded()) {
    const now = performance.now();
    if (supervision.judging()) judgingSince ??= now;
    else if (now - started >= exitSeenWithinMs) return;
    if (judgingSince !== undefined && now - judgingSince >= judgementWaitMs) return;
    await sleep(monitorRecordPollMs);
  }
}

/** Whether a look found a definite sign that the launch does not serve; silence is no such sign. */
function foundNotServing(observation: ClusterObservation): boolean {
  const coordinator = observation.coordinator?.health;
  return observation.gone.length > 0 || observation.stages.some((s) => s.transport === "closed") || coordinator === "down" || coordinator === "loading";
}

/** How long a pass looks for the monitor to begin judging a death, ms: an exit watch polls every 100 ms. */
const exitSeenWithinMs = 500;
/**
 * How long a pass waits at most for the monitor's judgement of a death, ms: the exit is weighed
 * against its peers' over a 500 ms window and a log read of up to 2 s.
 */
const judgementWaitMs = 3_000;
/** How often the pass looks whether the monitor recorded a death meanwhile, ms. */
const monitorRecordPollMs = 50;

/**
 * The previous daemon's stage cards as this daemon's previous observation, so a card whose process
 * still runs unchanged keeps its `since` across a daemon restart instead of starting again at the
 * adoption. Only cards of this launch's processes qualify: same pid as the ledger records (whose
 * kernel start time the liveness probe checks against the running process), and observed since this
 * launch began — a card from an earlier launch whose pid the kernel has since recycled is dropped.
 */
function inheritedObservation(cards: Pass["memory"]["inheritedCards"], entry: LedgerEntry): ClusterObservation | undefined {
  if (cards === undefined) return undefined;
  const launchedAt = Date.parse(entry.startedAt);
  const stages = cards.filter((card) => {
    const process = entry.processes.find((p) => p.role === "stage" && (p.index ?? 0) === card.index);
    return process !== undefined && process.pid === card.pid && card.since !== undefined && Date.parse(card.since) >= launchedAt;
  });
  if (stages.length === 0) return undefined;
  return { cluster: entry.cluster, at: entry.startedAt, health: "Healthy", stages, problems: [], gone: [] };
}

/**
 * A launch is carried out within one pass, which leaves its entry running, torn down or tearing
 * down: an entry still "launching" when a pass begins was cut short by the end of the daemon that
 * started it (a kill -9, a reboot). That launch says nothing about the cluster, so it is given back
 * to the revision's restart budget, once, if it had started a process (each is recorded before it
 * starts): only then is a launch counted, and its count written (see the launch step).
 */
function refundInterruptedLaunch(pass: Pass, entry: LedgerEntry): void {
  const { memory } = pass;
  const restarts = memory.restarts;
  if (entry.phase !== "launching" || entry.processes.length === 0 || restarts === undefined || restarts.revision !== entry.revision || restarts.count === 0) return;
  if (memory.refundedLaunch === entry.startedAt) return;
  memory.refundedLaunch = entry.startedAt;
  restarts.count -= 1;
  pass.world.log.info(
    { cluster: pass.name, startedAt: entry.startedAt },
    "a launch cut short by the end of the daemon that started it (killed, or its machine restarted) does not count against the restart budget",
  );
}
