/**
 * `shardctl diff [file…]`: what the daemon would do, decided by the daemon's own decision table
 * (ownership, the plan, the restart budget and the prune guard included) from the definitions, the
 * ledger of what runs and the status files. It probes nothing: processes that died since the last
 * pass are the daemon's to notice. Exit 0 when the daemon would change nothing, 2 when it would,
 * 1 on an error.
 */
import { basename, relative } from "node:path";
import { parseArgs } from "node:util";
import { launchIdentity, planForCluster } from "../../cluster/index.js";
import { isShardctlError, messageOf } from "../../errors/index.js";
import { Ledger, type LedgerEntry } from "../../launch/index.js";
import { nextAction, readStatus, statusFileFor, type DecisionMemory, type DesiredState, type NextAction, type ObservedState } from "../../reconciler/index.js";
import { computeRevision, findClusterFiles, formatIssue, loadCluster, type ClusterSpec, type Settings } from "../../spec/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...contextOptions } });
  const context = await loadContext(values);
  const { settings, clustersDir } = context;
  const ledger = new Ledger(settings.daemon.stateDir);
  const files = positionals.length > 0 ? await Promise.all(positionals.map((p) => resolveClusterFile(p, clustersDir))) : await findClusterFiles(clustersDir);
  const entries = await ledger.list();
  const ours = (entry: Pick<LedgerEntry, "owner">): boolean => entry.owner === undefined || entry.owner === clustersDir;
  const observedOf = (entry: LedgerEntry | undefined): ObservedState => ({
    ...(entry === undefined ? {} : { entry }),
    ours: entry !== undefined && ours(entry),
    gone: [],
    dirExists: true,
    definitions: files.length,
    ownEntries: entries.filter(ours).length,
  });

  let errors = 0;
  const changes: string[] = [];
  const notes: string[] = [];
  for (const file of files) {
    const name = basename(file, ".toml");
    const loaded = await loadCluster(file, settings);
    if (!loaded.ok) {
      for (const issue of loaded.issues) console.error(formatIssue({ ...issue, file: relative(process.cwd(), issue.file) || issue.file }));
      errors++;
      continue;
    }
    const spec = loaded.value;
    const revision = computeRevision(spec, settings);
    const entry = await ledger.read(name);
    const desired: DesiredState = { kind: "defined", revision, desired: spec.desired, suspend: spec.suspend };
    const memory: DecisionMemory = { launches: await launchesAt(file, revision) };
    let action = nextAction(desired, observedOf(entry), memory, settings);
    if (action.kind === "plan") {
      try {
        memory.planned = await planOf(spec, settings, revision);
      } catch (error) {
        // As the daemon: a terminal failure stalls, a transient one is retried (and is an error here).
        if (isShardctlError(error) && error.terminal) notes.push(`! ${name}: the daemon will not act: ${error.reason}: ${error.message}`);
        else {
          console.error(`${name}: cannot plan: ${messageOf(error)}`);
          errors++;
        }
        continue;
      }
      action = nextAction(desired, observedOf(entry), memory, settings);
    }
    const line = describe(name, revision, action, entry, spec);
    if (line?.startsWith("!") === true) notes.push(line);
    else if (line !== undefined) changes.push(line);
  }
  // What runs without a definition is pruned (only when looking at the whole directory).
  if (positionals.length === 0) {
    const defined = new Set(files.map((f) => basename(f, ".toml")));
    for (const entry of entries) {
      if (defined.has(entry.cluster)) continue;
      const line = describe(entry.cluster, entry.revision, nextAction({ kind: "absent" }, observedOf(entry), { launches: 0 }, settings), entry);
      if (line?.startsWith("!") === true) notes.push(line);
      else if (line !== undefined) changes.push(line);
    }
  }
  for (const line of [...changes, ...notes]) console.log(line);
  if (errors > 0) return 1;
  if (changes.length === 0) console.log("no differences");
  return changes.length > 0 ? 2 : 0;
}

/** One line for a decision: `+` launch, `~` replace or update, `-` stop or prune, `!` will not act; none when nothing changes. */
function describe(name: string, revision: string, action: NextAction, entry: LedgerEntry | undefined, spec?: ClusterSpec): string | undefined {
  const short = revision.slice(0, 12);
  switch (action.kind) {
    case "launch": {
      const replace = action.replace;
      if (replace === undefined) return `+ ${name}: launch revision ${short}`;
      if (replace.revision !== revision) return `~ ${name}: replace revision ${replace.revision.slice(0, 12)} with ${short}`;
      return `~ ${name}: finish ${replace.phase === "launching" ? "an interrupted launch" : "an interrupted teardown"}, then launch`;
    }
    case "adopt":
      return action.inPlace ? `~ ${name}: apply revision ${short} in place (router registration only, no restart)` : undefined;
    case "stop":
      return action.teardown ? `- ${name}: stop (${action.why === "Stopped" ? 'desired = "stopped"' : "distributed serving is disabled"})` : undefined;
    case "prune":
      return `- ${name}: prune (its definition is gone)`;
    case "stall":
      return `! ${name}: the daemon will not act: ${action.reason}${stallDetail(action.reason, entry, spec)}`;
    case "forget":
    case "suspend":
    case "plan":
      return undefined;
  }
}

function stallDetail(reason: string, entry: LedgerEntry | undefined, spec: ClusterSpec | undefined): string {
  if (reason === "ClusterOwnedElsewhere") return ` (it runs from ${entry?.owner})`;
  if (reason === "RestartBudgetExhausted" && spec !== undefined) return ` (run \`shardctl reconcile ${spec.name}\` for a fresh budget)`;
  return "";
}

/** The plan the decision needs, as the daemon makes it when nothing is probed. */
async function planOf(spec: ClusterSpec, settings: Settings, revision: string): Promise<NonNullable<DecisionMemory["planned"]>> {
  const { plan } = await planForCluster(spec, settings);
  return { revision, feasible: plan.feasible, errors: plan.errors, identity: launchIdentity(spec, settings, plan) };
}

/** Launches at `revision` so far, as the status file records them. */
async function launchesAt(file: string, revision: string): Promise<number> {
  const restarts = (await readStatus(statusFileFor(file)).catch(() => undefined))?.restarts;
  return restarts !== undefined && restarts.revision === revision ? restarts.count : 0;
}
