/**
 * `shardctl wait <name|file> --for condition=Ready [--revision <rev|HEAD>] [--timeout 10m]`: what CI
 * calls. Exit 0 once the condition holds *at that revision* — a stale Ready from the previous
 * revision never satisfies it (kubectl wait was fooled by exactly that) —, 1 on timeout, when the
 * cluster is Stalled at that revision, or once the revision is superseded (the definition moved on
 * from it, and the daemon with it: a later push), printing the reason.
 */
import { stat } from "node:fs/promises";
import { parseArgs } from "node:util";
import { formatIssue, loadCluster, type ClusterSpec, type Settings } from "../../spec/index.js";
import {
  conditionTypes,
  describeSilence,
  desiredStateOf,
  findDaemon,
  nextAction,
  observedStateOf,
  readStatus,
  statusFileFor,
  type ClusterStatus,
  type ConditionType,
  type DaemonSighting,
  type DecisionMemory,
} from "../../reconciler/index.js";
import { closestName, isShardctlError, showText } from "../../errors/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { parseDuration } from "../duration.js";
import { usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";
import { statusWritesRefused } from "../daemon-keeper.js";

const usage = usageOf("wait");

/**
 * How much earlier than the daemon's start a file time may read and still be its own write, ms: file
 * systems that keep times to the second (HFS+, ext3, many network mounts) floor them.
 */
const mtimeGrainMs = 1_000;

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...contextOptions, for: { type: "string" }, revision: { type: "string" }, timeout: { type: "string" } },
  });
  if (positionals.length !== 1) throw new UsageError(usage);
  const match = /^condition=([A-Za-z]+)$/.exec(values.for ?? "condition=Ready");
  const type = match?.[1] as ConditionType | undefined;
  if (type === undefined || !conditionTypes.includes(type)) {
    const guess = match?.[1] === undefined ? undefined : closestName(match[1], conditionTypes);
    throw new UsageError(
      `expected --for condition=<${conditionTypes.join("|")}>, got "${values.for}"${guess === undefined ? "" : ` (did you mean condition=${guess}?)`}`,
    );
  }
  const timeoutMs = parseDuration(values.timeout ?? "10m", "timeout");
  const context = await loadContext(values);
  const file = await resolveClusterFile(positionals[0]!, context.clustersDir);

  let revision = values.revision ?? "HEAD";
  if (revision !== "HEAD" && !/^[0-9a-f]{7,64}$/.test(revision)) {
    throw new UsageError(`expected --revision to be HEAD or a revision (at least 7 hex digits, as status prints them), got "${revision}"`);
  }
  const loaded = await loadCluster(file, context.settings);
  if (revision === "HEAD") {
    if (!loaded.ok) {
      for (const issue of loaded.issues) console.error(formatIssue(issue));
      console.error(`${file} is invalid: it has no revision to wait for`);
      return 1;
    }
    revision = desiredStateOf(loaded.value, context.settings).revision;
  }
  // A definition that, as it stands, never gets the condition at this revision fails at the first
  // look rather than at the end of the timeout (CI would otherwise wait 10 minutes to learn it).
  const why = loaded.ok ? whyNeverHolds(type, revision, loaded.value, context.settings, context.clustersDir) : undefined;
  const never = why === undefined ? undefined : `${loaded.ok ? loaded.value.name : file}: condition ${type} will never hold at revision ${short(revision)}: ${why}`;

  const deadline = performance.now() + timeoutMs;
  // Whether the definition has asked for the awaited revision at some look (from the start when
  // waiting for HEAD): once it asks for another, and the daemon follows that one, the awaited
  // revision will not be served. Until it has asked for it, a revision computed elsewhere (CI's
  // checkout) may simply not have reached this one yet.
  let askedFor = loaded.ok && desiredStateOf(loaded.value, context.settings).revision.startsWith(revision);
  let last: ClusterStatus | undefined;
  // Why the status file, which exists, could not be read at the last look: the daemon rewrites it, so waiting goes on.
  let unreadable: string | undefined;
  // The silent daemon that wrote the condition, when it was met at the last look.
  let silent: DaemonSighting | undefined;
  // Whether the condition was met at the last look, in a status no daemon keeps current.
  let unwatched: boolean;
  // The running daemon, when the status at the last look was written before it started.
  let unconfirmed: DaemonSighting | undefined;
  for (;;) {
    // Its time first: a write between the two then pairs the newer word with the older time, never
    // a former daemon's word with this one's time.
    const writtenAtMs = (await stat(statusFileFor(file)).catch(() => undefined))?.mtimeMs;
    [last, unreadable] = await readStatusOf(file);
    const gitCommit = last?.gitCommit?.startsWith(revision) === true ? last.gitCommit : last?.gitHead?.startsWith(revision) === true ? last.gitHead : undefined;
    if (values.revision !== undefined && gitCommit !== undefined) {
      throw new UsageError(
        `--revision ${revision} is the git commit ${short(gitCommit)}, not a revision: a revision is the hash of the definition (and of its nodes' registry entries), which \`shardctl diff ${positionals[0]}\` prints from any checkout, and \`--revision HEAD\` reads from the file here`,
      );
    }
    const judged = judge(last, type, revision, loaded.ok);
    const daemon = judged !== undefined ? await findDaemon(context.clustersDir) : undefined;
    // A verdict written before the running daemon started is the word of one that no longer runs
    // (it was restarted, and what ran may have died meanwhile): it counts once this daemon's first
    // pass of the cluster has written it again (or touched it, saying the same).
    unconfirmed = daemon?.startedAtMs !== undefined && writtenAtMs !== undefined && writtenAtMs < daemon.startedAtMs - mtimeGrainMs ? daemon : undefined;
    const verdict = unconfirmed === undefined ? judged : undefined;
    silent = verdict === "met" && daemon?.silent === true ? daemon : undefined;
    // No daemon at all (it crashed, or was stopped): what the file says held when it was written,
    // and nothing has looked since (its engines may be gone with it). Not trusted, as a silent
    // daemon's word is not: the wait goes on, for a daemon to start and say it again.
    unwatched = verdict === "met" && daemon === undefined;
    if (verdict === "met" && daemon !== undefined && silent === undefined) {
      console.log(showText(`${last!.cluster}: condition ${type} holds at revision ${short(revision)} (${last!.health})`));
      return 0;
    }
    if (verdict !== undefined && verdict !== "met") {
      console.error(showText(verdict));
      return 1;
    }
    // What the status says comes first (a Stalled names the more precise reason).
    if (never !== undefined) {
      console.error(showText(never));
      return 1;
    }
    const asked = await revisionAskedNow(file, context.settings);
    if (asked !== undefined && asked.startsWith(revision)) askedFor = true;
    else if (askedFor && asked !== undefined && last !== undefined && last.observedRevision === asked) {
      console.error(
        showText(
          `${last.cluster}: revision ${short(revision)} is superseded: ${file} now asks for revision ${short(asked)}, which the daemon follows (${last.health}); revision ${short(revision)} will not be served (wait for the new one: --revision ${short(asked)})`,
        ),
      );
      return 1;
    }
    if (performance.now() >= deadline) {
      const condition = last?.conditions.find((c) => c.type === type);
      const now =
        unconfirmed !== undefined
          ? `the status was written before the running daemon (pid ${unconfirmed.pid}) started, and that daemon has not looked at the cluster since: what it says (${type}=${last?.conditions.find((c) => c.type === type)?.status ?? "?"}) is a former daemon's word`
          : silent !== undefined
            ? `the status says ${type}=True, but the daemon that wrote it is silent (${describeSilence(silent)}): nothing keeps it current`
            : unwatched
              ? `the status says ${type}=True, but no shardctl daemon is watching ${context.clustersDir}: nothing keeps it current, and what it describes may be gone (start one: shardctl daemon)`
              : unreadable !== undefined
                ? unreadable
                : last === undefined
                  ? "no status file yet"
                  : `observed revision ${short(last.observedRevision)}, health ${last.health}${condition ? `, ${type}=${condition.status}${ofRevision(condition.observedRevision, revision)} (${condition.reason}: ${condition.message})` : ""}${lastErrorOf(last)}`;
      // The status's words are the daemon's and its engines' (log lines, error output): each control
      // character is shown as its escape, as `status` shows it, never sent to the terminal.
      // Whether anything could have changed it: a wait with no daemon watching is a wait for nothing.
      // And whether it could have written what it saw: a full disk under the status files keeps an old word.
      const watching = silent === undefined && !unwatched ? await findDaemon(context.clustersDir) : undefined;
      const full = watching !== undefined && !watching.silent ? await statusWritesRefused(context.clustersDir, watching) : undefined;
      const keeper =
        silent === undefined && !unwatched && watching === undefined
          ? `; no shardctl daemon is watching ${context.clustersDir} (start one: shardctl daemon)`
          : full !== undefined
            ? `; ${full}`
            : "";
      console.error(showText(`timed out after ${values.timeout ?? "10m"} waiting for condition ${type} at revision ${short(revision)}: ${now}${keeper}`));
      return 1;
    }
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

/** The revision the definition asks for now; undefined while it cannot be read or is invalid (an edit under way). */
async function revisionAskedNow(file: string, settings: Settings): Promise<string | undefined> {
  const loaded = await loadCluster(file, settings).catch(() => undefined);
  return loaded?.ok === true ? desiredStateOf(loaded.value, settings).revision : undefined;
}

/** The status of a definition file, or why its status file exists but cannot be read. */
async function readStatusOf(file: string): Promise<[ClusterStatus | undefined, string | undefined]> {
  try {
    return [await readStatus(statusFileFor(file)), undefined];
  } catch (error) {
    if (!isShardctlError(error, "StatusFileUnreadable")) throw error;
    return [undefined, error.message];
  }
}

/** The conditions only a staged, launched cluster reaches. */
const runtimeConditions: readonly ConditionType[] = ["Ready", "Staged", "StagesListening", "CoordinatorHealthy", "Registered"];

/**
 * Why the daemon will never set `type` True at `revision` (a prefix, as status prints it) for this
 * definition, or undefined when it may (always for another revision than the file's). The
 * decision table is asked, with nothing running: whether it would plan the revision (Planned),
 * and whether it would launch a feasible plan of it (the runtime conditions: an infeasible plan is
 * the daemon's to report, as Stalled). An answer that stops short of that says why, in the table's
 * order: a suspended definition gets no action at all; a stopped one is neither planned nor
 * launched; with distributed serving off a definition is planned, never launched.
 */
function whyNeverHolds(type: ConditionType, revision: string, spec: ClusterSpec, settings: Settings, dir: string): string | undefined {
  const needed = type === "Planned" ? "plan" : runtimeConditions.includes(type) ? "launch" : undefined;
  const desired = desiredStateOf(spec, settings);
  if (needed === undefined || !desired.revision.startsWith(revision)) return undefined;
  const feasible = { revision: desired.revision, feasible: true, errors: [], identity: "" };
  const memory: DecisionMemory = needed === "plan" ? { launches: 0 } : { launches: 0, planned: feasible };
  const action = nextAction(desired, observedStateOf(undefined, dir), memory, settings);
  if (action.kind === needed) return undefined;
  if (action.kind === "suspend") return `${spec.file} says suspend = true: the daemon takes no action on it (set suspend = false)`;
  if (action.kind === "stop" && action.why === "Stopped") return `${spec.file} says desired = "stopped": nothing is planned or launched (set desired = "running")`;
  if (action.kind === "stop" && action.why === "DistributedDisabled") {
    return `[distributed] enabled = false in ${settings.file}: the daemon plans clusters but stages and launches none (set enabled = true)`;
  }
  // Anything else (a restart budget of 0) is for the status to tell.
  return undefined;
}

/** Stalls that say the definition cannot be read: stale once it reads (a fix the daemon has not yet seen). */
const definitionStalls: ReadonlySet<string> = new Set(["InvalidDefinition", "DefinitionUnreadable"]);

/**
 * "met", a failure message (Stalled at this revision), or undefined to keep waiting. `definitionReads`:
 * the definition, as this command read it, is valid; a stall for an invalid one is then the daemon's
 * view before the fix (an invalid edit reverted to this very revision), and waiting goes on.
 */
function judge(status: ClusterStatus | undefined, type: ConditionType, revision: string, definitionReads: boolean): "met" | string | undefined {
  // A full revision or the prefix status prints: both name exactly one revision here.
  const at = (observed: string): boolean => observed.length > 0 && observed.startsWith(revision);
  if (status === undefined || !at(status.observedRevision)) return undefined;
  const condition = status.conditions.find((c) => c.type === type);
  if (condition?.status === "True" && at(condition.observedRevision)) return "met";
  const stalled = status.conditions.find((c) => c.type === "Stalled");
  if (stalled?.status === "True" && at(stalled.observedRevision) && !(definitionReads && definitionStalls.has(stalled.reason))) {
    return `${status.cluster} is Stalled at revision ${short(revision)}: ${stalled.reason}: ${stalled.message}`;
  }
  return undefined;
}

function short(revision: string): string {
  return revision.slice(0, 12);
}

/**
 * " of revision <r> (not the one waited for)" when a condition describes another revision than the
 * awaited one: a revision that cannot be planned leaves the last one's Ready=True standing.
 */
function ofRevision(described: string, awaited: string): string {
  return described === awaited ? "" : ` of revision ${short(described)}, not the one waited for`;
}

/** The status's last error, said after what the wait found: why the awaited revision is not there yet. */
function lastErrorOf(status: ClusterStatus): string {
  return status.lastError === undefined ? "" : `; last error ${status.lastError.reason}: ${status.lastError.message}`;
}
