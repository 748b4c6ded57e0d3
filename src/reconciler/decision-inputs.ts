/**
 * The inputs of the decision table, each made one way for the daemon's pass and for the commands
 * that ask the table (`shardctl diff`, `shardctl wait`): who owns a ledger entry, what a definition
 * wants, what runs, the launches at a revision and the plan of it. A command that built any of
 * them by hand could announce a decision the daemon never makes.
 */
import { realpathSync, statSync } from "node:fs";
import { join } from "node:path";
import { launchIdentity, type PlannedCluster } from "../cluster/index.js";
import { pathExists } from "../files/index.js";
import type { Ledger, LedgerEntry } from "../launch/index.js";
import { computeRevision, findClusterFiles, loadCluster, type ClusterSpec, type Settings } from "../spec/index.js";
import type { DecisionMemory, DesiredState, ObservedState } from "./next-action.js";

/** Launched from the definitions directory `dir` (absolute); an entry from before owners were recorded counts as its own. */
export function isOwnedBy(entry: Pick<LedgerEntry, "owner">, dir: string): boolean {
  return entry.owner === undefined || entry.owner === dir || isSameDirectory(entry.owner, dir);
}

/**
 * The ledger's entry of a cluster as the daemon of `dir` (absolute), which defines it, holds it.
 * One launched from a folder that no longer exists (the checkout moved or renamed, a release's
 * folder removed) is taken over and owned by `dir` from now on: no daemon can watch that folder, or
 * define the cluster there. Any other is as it is, another daemon's included.
 */
export function heldEntry<E extends Pick<LedgerEntry, "owner">>(entry: E | undefined, dir: string): E | undefined {
  if (entry === undefined || isOwnedBy(entry, dir) || !isGone(entry.owner!)) return entry;
  return { ...entry, owner: dir };
}

/**
 * Whether a folder is known not to exist (ENOENT along its path). One that cannot be looked at (a
 * permission, a network mount away for a moment: EACCES, ESTALE, EIO) is not gone.
 */
function isGone(path: string): boolean {
  try {
    return statSync(path, { throwIfNoEntry: false }) === undefined;
  } catch {
    return false;
  }
}

/**
 * Whether two paths name one directory (one through a symbolic link, or both): the daemon of a
 * directory is one whatever name it was started with (its lock lies where the directory does).
 * Asked only when the names differ; a path that no longer exists names nothing.
 */
function isSameDirectory(a: string, b: string): boolean {
  try {
    return realpathSync(a) === realpathSync(b);
  } catch {
    return false;
  }
}

/** What a definition that parsed wants, at its revision. */
export function desiredStateOf(spec: ClusterSpec, settings: Settings): Extract<DesiredState, { kind: "defined" }> {
  return { kind: "defined", revision: computeRevision(spec, settings), desired: spec.desired, suspend: spec.suspend };
}

/** What the prune guard looks at: whether the definitions directory exists, the ledger entries it owns, and the definitions that count. */
export interface DirectoryView {
  exists: boolean;
  /**
   * Definition files that keep the directory from reading as emptied: those of the clusters the
   * daemon's own ledger entries record (valid or not: an invalid one keeps its cluster), else the
   * first other file that is a valid definition (a cluster renamed, or its model moved to another).
   */
  liveDefinitions: number;
  ownEntries: number;
}

/**
 * Read the prune guard's view of `dir` (absolute). A directory that is missing has no definitions;
 * one that is there but cannot be listed (a permission taken away for a moment, a network mount's
 * hiccup) is an error, not an empty directory: the guard would otherwise let its clusters be pruned.
 */
export async function readDirectoryView(dir: string, ledger: Pick<Ledger, "list">, settings: Settings): Promise<DirectoryView> {
  const [exists, entries] = await Promise.all([pathExists(dir), ledger.list()]);
  // Counted by the clusters that run, and by valid definitions: a stray file (a merge tool's copy,
  // a binary) is neither, and must not let a checkout that removed every definition through the guard.
  const files = exists ? await findClusterFiles(dir) : [];
  const own = entries.filter((e) => isOwnedBy(e, dir));
  const ownFiles = new Set(own.map((e) => join(dir, `${e.cluster}.toml`)));
  let liveDefinitions = files.filter((file) => ownFiles.has(file)).length;
  for (const file of files) {
    if (liveDefinitions > 0) break;
    if ((await loadCluster(file, settings).catch(() => undefined))?.ok === true) liveDefinitions = 1;
  }
  return { exists, liveDefinitions, ownEntries: own.length };
}

/** What was seen besides the ledger's entry: processes definitely gone, and the directory when the definition is missing. */
export interface Sightings {
  /** Processes of the entry that are definitely gone. Default none (nothing probed). */
  gone?: readonly string[];
  /** Only a missing definition consults the prune guard: without it, the directory counts as present and empty. */
  directory?: DirectoryView;
}

/** What runs under this cluster's name, as the decision sees it, for the daemon of `dir` (absolute). */
export function observedStateOf(entry: NonNullable<ObservedState["entry"]> | undefined, dir: string, seen: Sightings = {}): ObservedState {
  return {
    ...(entry === undefined ? {} : { entry }),
    ours: entry !== undefined && isOwnedBy(entry, dir),
    gone: seen.gone ?? [],
    dirExists: seen.directory?.exists ?? true,
    liveDefinitions: seen.directory?.liveDefinitions ?? 0,
    ownEntries: seen.directory?.ownEntries ?? 0,
  };
}

/** A plan of a revision as the daemon keeps it: with the launch identity it implies. */
export type IdentifiedPlan = PlannedCluster & { revision: string; identity: string };

/** Give a plan of `revision` the launch identity it implies. */
export function identifyPlan(spec: ClusterSpec, settings: Settings, revision: string, planned: PlannedCluster): IdentifiedPlan {
  return { revision, ...planned, identity: launchIdentity(spec, settings, planned.plan) };
}

/** The daemon's restart record of a revision: in its memory, and in the status file that carries it across restarts. */
export interface RestartCount {
  revision: string;
  count: number;
}

/** Launches at `revision` so far: a record of another revision (or none) counts 0. */
export function launchCountOf(restarts: RestartCount | undefined, revision: string | undefined): number {
  return restarts !== undefined && restarts.revision === revision ? restarts.count : 0;
}

/** What the decision needs of a plan: its revision, whether it fits, why not, and its launch identity. */
export function planSummaryOf(planned: Pick<IdentifiedPlan, "revision" | "plan" | "identity">): NonNullable<DecisionMemory["planned"]> {
  return { revision: planned.revision, feasible: planned.plan.feasible, errors: planned.plan.errors, identity: planned.identity };
}

/**
 * What the daemon remembers that decides, at `revision`: its launches there, the plan made so far (if
 * any), and whether this pass failed to make it.
 */
export function decisionMemoryOf(
  restarts: RestartCount | undefined,
  revision: string | undefined,
  planned: Pick<IdentifiedPlan, "revision" | "plan" | "identity"> | undefined,
  planFailed = false,
): DecisionMemory {
  return {
    launches: launchCountOf(restarts, revision),
    ...(planned === undefined ? {} : { planned: planSummaryOf(planned) }),
    ...(planFailed ? { planFailed } : {}),
  };
}
