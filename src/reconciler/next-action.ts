/**
 * The reconciler's one decision: given what the definition wants, what runs, what the daemon
 * remembers and the settings, what is the next action? Pure, so the daemon and `shardctl diff`
 * decide the same way, and so it is tested as a table. The order of the rows is the order of
 * precedence: a missing definition is about pruning; an invalid one is never applied, and the
 * last valid one is kept (what runs keeps running; once nothing serves, it is launched again); a
 * suspended one is left alone; a cluster another daemon launched is never touched; then stop,
 * plan, adopt, replace, the restart budget and finally launch.
 */
import type { LedgerEntry } from "../launch/index.js";
import type { ReconcilerReason } from "../errors/index.js";
import type { Settings } from "../spec/index.js";

/**
 * What the definition file says, as far as the decision cares. An invalid one carries what the last
 * valid definition said (`lastGood`), when the daemon knows it: that is what it goes on keeping.
 */
export type DesiredState =
  | { kind: "absent" }
  | { kind: "invalid"; issues: string[]; lastGood?: DefinedState }
  | { kind: "defined"; revision: string; desired: "running" | "stopped"; suspend: boolean };

export type DefinedState = Extract<DesiredState, { kind: "defined" }>;

/** What runs, from the ledger and the probes of this pass. */
export interface ObservedState {
  /** The ledger's entry of this cluster name, if any. */
  entry?: Pick<LedgerEntry, "revision" | "identity" | "phase" | "owner">;
  /** The entry was launched from this daemon's directory (or before owners were recorded). */
  ours: boolean;
  /** Processes of the entry that are definitely gone (not merely doubtful). */
  gone: readonly string[];
  /** The definitions directory exists. */
  dirExists: boolean;
  /** Definition files that keep the directory from reading as emptied (see DirectoryView.liveDefinitions). */
  liveDefinitions: number;
  /** Ledger entries of this daemon's directory, this one included. */
  ownEntries: number;
}

/** What the daemon remembers of this cluster that decides: the plan of a revision and the launches at it. */
export interface DecisionMemory {
  planned?: { revision: string; feasible: boolean; errors: ReadonlyArray<{ reason: string; message: string }>; identity: string };
  /** Launches at the desired revision so far. */
  launches: number;
  /** This pass tried to plan the desired revision and could not (a node that cannot be probed). */
  planFailed?: boolean;
}

export type DecisionSettings = { daemon: Pick<Settings["daemon"], "restartBudget" | "allowMassPrune">; distributed: Pick<Settings["distributed"], "enabled"> };

/** Why a pass stalls: terminal until the definition (or the world) changes. */
export type StallReason = Extract<
  ReconcilerReason,
  "DefinitionsDirMissing" | "MassPruneRefused" | "InvalidDefinition" | "ClusterOwnedElsewhere" | "PlanInfeasible" | "RestartBudgetExhausted"
>;

export type NextAction =
  /** No definition and nothing of ours runs: drop the status file. */
  | { kind: "forget" }
  /** The definition is gone: tear down what runs, then drop the status file. */
  | { kind: "prune" }
  /** Do nothing until something changes; `serving` says whether what runs keeps serving. */
  | { kind: "stall"; reason: StallReason; serving: boolean; teardownFirst?: boolean }
  | { kind: "suspend" }
  /** Nothing should run: tear down what does. */
  | { kind: "stop"; why: "Stopped" | "DistributedDisabled"; teardown: boolean }
  /** The decision needs the plan of this revision. */
  | { kind: "plan" }
  /** What runs is this launch: watch it (and apply a router-only revision in place). */
  | { kind: "adopt"; inPlace: boolean }
  /**
   * Launch, after tearing down what runs at another launch identity, broken or half-done.
   * `lastValid`: the definition is invalid, and this launches the last valid one again.
   */
  | { kind: "launch"; replace?: { revision: string; phase: LedgerEntry["phase"]; gone: readonly string[] }; lastValid?: true };

export function nextAction(desired: DesiredState, observed: ObservedState, memory: DecisionMemory, settings: DecisionSettings): NextAction {
  const entry = observed.entry;
  if (desired.kind === "absent") {
    if (entry === undefined || !observed.ours) return { kind: "forget" };
    // A missing directory is a broken checkout or mount, never a decision to stop anything.
    if (!observed.dirExists) return { kind: "stall", reason: "DefinitionsDirMissing", serving: true };
    // Every running cluster's definition gone at once, and no valid one in their place (an empty
    // directory, or one left with stray files only), is more likely a broken checkout than intent.
    if (observed.liveDefinitions === 0 && observed.ownEntries > 1 && !settings.daemon.allowMassPrune) {
      return { kind: "stall", reason: "MassPruneRefused", serving: entry.phase === "running" };
    }
    return { kind: "prune" };
  }
  if (desired.kind === "invalid") return keepLastValid(desired, observed, memory, settings);
  if (desired.suspend) return { kind: "suspend" };
  if (entry !== undefined && !observed.ours) return { kind: "stall", reason: "ClusterOwnedElsewhere", serving: false };
  if (desired.desired === "stopped") return { kind: "stop", why: "Stopped", teardown: entry !== undefined };

  const planned = memory.planned;
  if (planned?.revision !== desired.revision) {
    // The plan is needed to launch, not to watch what runs: a launch of this very revision found
    // running when the plan cannot be made (planning probes every node; one is partitioned or its
    // sshd is down) is adopted without it, so a death is still found — at once for a process
    // already gone — and torn down and deregistered. The next pass plans again.
    if (memory.planFailed === true && entry?.phase === "running" && entry.revision === desired.revision) return { kind: "adopt", inPlace: false };
    return { kind: "plan" };
  }
  if (!planned.feasible) return { kind: "stall", reason: "PlanInfeasible", serving: entry?.phase === "running" };
  if (!settings.distributed.enabled) return { kind: "stop", why: "DistributedDisabled", teardown: entry !== undefined };

  if (entry !== undefined) {
    const sameLaunch = entry.revision === desired.revision || entry.identity === planned.identity;
    // Only a process definitely gone breaks it here: doubtful probes are the supervision's to
    // judge, with strikes, so one lost packet on a resync never tears a healthy cluster down.
    if (entry.phase === "running" && sameLaunch && observed.gone.length === 0) return { kind: "adopt", inPlace: entry.revision !== desired.revision };
  }
  const replace = entry === undefined ? undefined : { revision: entry.revision, phase: entry.phase, gone: observed.gone };
  if (memory.launches >= settings.daemon.restartBudget) {
    return { kind: "stall", reason: "RestartBudgetExhausted", serving: false, ...(replace === undefined ? {} : { teardownFirst: true }) };
  }
  return { kind: "launch", ...(replace === undefined ? {} : { replace }) };
}

/**
 * An invalid definition is never applied, nor does it stop the daemon keeping the last valid one:
 * what runs keeps running, whatever its revision, and once nothing serves (a death, a launch cut
 * short) the last valid revision is launched (planned first if need be), within its restart
 * budget, as it would be without the edit. Anything else waits for a valid definition: the stall
 * says it is invalid.
 */
function keepLastValid(desired: Extract<DesiredState, { kind: "invalid" }>, observed: ObservedState, memory: DecisionMemory, settings: DecisionSettings): NextAction {
  const entry = observed.entry;
  const serving = entry?.phase === "running" && observed.gone.length === 0;
  const kept = desired.lastGood === undefined || serving ? undefined : nextAction(desired.lastGood, observed, memory, settings);
  if (kept?.kind === "launch") return { ...kept, lastValid: true };
  if (kept?.kind === "plan") return kept;
  const teardownFirst = kept?.kind === "stall" && kept.teardownFirst === true;
  return { kind: "stall", reason: "InvalidDefinition", serving: entry?.phase === "running" && !teardownFirst, ...(teardownFirst ? { teardownFirst } : {}) };
}
