/**
 * `shardctl diff [file…] [--probe]`: what the daemon would do, decided by the daemon's own decision
 * table (ownership, the plan, the restart budget and the prune guard included) from the definitions,
 * the ledger of what runs and the status files, each input made by the function the daemon makes it
 * with. It probes no process: those that died since the last pass are the daemon's to notice. The
 * plan's budgets are the declared memory unless --probe asks the nodes as the daemon would; the
 * output says which. Exit 0 when the daemon would change nothing, 2 when it would, 1 on an error.
 */
import { basename, relative } from "node:path";
import { parseArgs } from "node:util";
import { createNodePool, daemonPlanOptions, describeBudgets, nodesOfCluster, planForCluster, type PlannedCluster } from "../../cluster/index.js";
import { isShardctlError, messageOf, showText } from "../../errors/index.js";
import { Ledger, type LedgerEntry } from "../../launch/index.js";
import type { NodePool } from "../../nodes/index.js";
import { describeInfeasiblePlan } from "../../planner/index.js";
import {
  decisionMemoryOf,
  desiredStateOf,
  identifyPlan,
  nextAction,
  heldEntry,
  observedStateOf,
  readDirectoryView,
  readStatus,
  statusFileFor,
  type IdentifiedPlan,
  type NextAction,
} from "../../reconciler/index.js";
import { definitionDigest, findClusterFiles, formatIssue, loadCluster, type ClusterSpec, type Settings } from "../../spec/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...contextOptions, probe: { type: "boolean" } } });
  const context = await loadContext(values);
  const { settings, clustersDir } = context;
  const ledger = new Ledger(settings.daemon.stateDir);
  const files = positionals.length > 0 ? await Promise.all(positionals.map((p) => resolveClusterFile(p, clustersDir))) : await findClusterFiles(clustersDir);
  const planner = new Planner(settings, values.probe === true);

  let errors = 0;
  // Definitions whose plan failed for good (the daemon stalls on them): said by a `!` line.
  let unplanned = 0;
  const changes: string[] = [];
  const notes: string[] = [];
  try {
    for (const file of files) {
      const name = basename(file, ".toml");
      const loaded = await loadCluster(file, settings);
      if (!loaded.ok) {
        for (const issue of loaded.issues) console.error(formatIssue({ ...issue, file: relative(process.cwd(), issue.file) || issue.file }));
        errors++;
        continue;
      }
      const spec = loaded.value;
      const desired = desiredStateOf(spec, settings);
      const { revision } = desired;
      // As the daemon holds it: one launched from a folder that no longer exists is taken over.
      const entry = heldEntry(await ledger.read(name), clustersDir);
      // Nothing is probed: no process counts as gone, and a defined cluster never consults the prune guard.
      const observed = observedStateOf(entry, clustersDir);
      // The restart record the daemon keeps in its memory survives in the status file.
      const restarts = (await readStatus(statusFileFor(file)).catch(() => undefined))?.restarts;
      let action = nextAction(desired, observed, decisionMemoryOf(restarts, revision, undefined), settings);
      let infeasible: string | undefined;
      if (action.kind === "plan") {
        let planned: IdentifiedPlan;
        try {
          planned = await planner.plan(spec, revision);
        } catch (error) {
          // As the daemon: a terminal failure stalls, a transient one is retried. Either way no plan
          // could be made, which a preview must not pass as "no changes" (exit 1).
          if (isShardctlError(error) && error.terminal) {
            notes.push(`! ${name}: the daemon will not act: ${error.reason}: ${error.message}`);
            unplanned++;
          } else console.error(showText(`${name}: cannot plan: ${messageOf(error)}`));
          errors++;
          continue;
        }
        action = nextAction(desired, observed, decisionMemoryOf(restarts, revision, planned), settings);
        // As the daemon's status says it: the plan's own errors, each with its reason.
        if (action.kind === "stall" && action.reason === "PlanInfeasible")
          infeasible = `! ${name}: the daemon will not act: ${describeInfeasiblePlan(planned.plan.errors)}`;
      }
      const line = infeasible ?? describe(name, revision, action, entry, spec, settings);
      if (line?.startsWith("!") === true) notes.push(line);
      else if (line !== undefined) changes.push(line);
      // A plan made but infeasible (a stage that does not fit) is one that cannot be applied either.
      if (action.kind === "stall" && action.reason === "PlanInfeasible") {
        unplanned++;
        errors++;
      }
    }
    // What runs without a definition is pruned (only when looking at the whole directory).
    if (positionals.length === 0) {
      const defined = new Set(files.map((f) => basename(f, ".toml")));
      const directory = await readDirectoryView(clustersDir, ledger, settings);
      for (const entry of await ledger.list()) {
        if (defined.has(entry.cluster)) continue;
        const action = nextAction({ kind: "absent" }, observedStateOf(entry, clustersDir, { directory }), decisionMemoryOf(undefined, undefined, undefined), settings);
        const line = describe(entry.cluster, entry.revision, action, entry);
        if (line?.startsWith("!") === true) notes.push(line);
        else if (line !== undefined) changes.push(line);
      }
    }
  } finally {
    await planner.close();
  }
  // Each line quotes text from outside (a definition's file name, a ledger's cluster and owner, an
  // error's message quoting a model's tensor names): shown, never obeyed by the terminal, and kept
  // to its one line (a newline in it is escaped too), so no decision line can be forged.
  for (const line of [...changes, ...notes]) console.log(showText(line));
  // Feasibility depends on the budgets: say which ones the plans above were made with.
  if (planner.budgets !== undefined) console.log(showText(`budgets: ${describeBudgets({ budgets: planner.budgets }, settings)}`));
  if (errors > 0) {
    if (unplanned > 0)
      console.error(
        `${unplanned === 1 ? "a definition" : `${unplanned} definitions`} cannot be planned (the ! lines say why): the daemon would not apply ${unplanned === 1 ? "it" : "them"}`,
      );
    return 1;
  }
  // Lines of clusters the daemon will not act on are no differences either, but "none" would hide them.
  if (changes.length === 0) console.log(notes.length === 0 ? "no differences" : "no changes the daemon would make");
  return changes.length > 0 ? 2 : 0;
}

/** One line for a decision: `+` launch, `~` replace or update, `-` stop or prune, `!` will not act; none when nothing changes. */
function describe(name: string, revision: string, action: NextAction, entry: LedgerEntry | undefined, spec?: ClusterSpec, settings?: Settings): string | undefined {
  const short = revision.slice(0, 12);
  switch (action.kind) {
    case "launch": {
      const replace = action.replace;
      if (replace === undefined) return `+ ${name}: launch revision ${short}`;
      if (replace.revision !== revision) return `~ ${name}: replace revision ${replace.revision.slice(0, 12)} with ${short}${replaceDetail(entry, spec, settings)}`;
      return `~ ${name}: finish ${replace.phase === "launching" ? "an interrupted launch" : "an interrupted teardown"}, then launch`;
    }
    case "adopt":
      return action.inPlace
        ? `~ ${name}: apply revision ${short} in place, no restart (what changed is not part of the launch: [router], or [plan] settings that keep the split)`
        : undefined;
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

/** Why a revision is replaced when its definition is as launched: what changed is the registry (the launch recorded the definition's digest). */
function replaceDetail(entry: LedgerEntry | undefined, spec: ClusterSpec | undefined, settings: Settings | undefined): string {
  if (entry?.definitionDigest === undefined || spec === undefined || settings === undefined || entry.definitionDigest !== definitionDigest(spec)) return "";
  const used = [...new Set([...spec.nodes, spec.coordinator.node])].filter((node) => settings.nodes[node] !== undefined);
  return ` (the definition is as launched: the registry entry of ${used.length === 1 ? "its node" : "one of its nodes"} ${used.join(", ")} in ${settings.file} changed)`;
}

function stallDetail(reason: string, entry: LedgerEntry | undefined, spec: ClusterSpec | undefined): string {
  if (reason === "ClusterOwnedElsewhere") return ` (it runs from ${entry?.owner})`;
  if (reason === "RestartBudgetExhausted" && spec !== undefined) return ` (run \`shardctl reconcile ${spec.name}\` for a fresh budget)`;
  return "";
}

/**
 * The plans the decisions need, made as the daemon makes them: from the declared memory, or with
 * `probe` by the daemon's own rule (what the stage nodes report, capped by what they declare, when
 * distributed serving is on; nothing probed when it is off, as the daemon probes nothing then).
 */
class Planner {
  /** Where the budgets of the plans made so far came from; undefined before the first. */
  budgets: PlannedCluster["budgets"] | undefined;
  private pool: NodePool | undefined;

  constructor(
    private readonly settings: Settings,
    private readonly probe: boolean,
  ) {}

  async plan(spec: ClusterSpec, revision: string): Promise<IdentifiedPlan> {
    const { settings } = this;
    // No Hub branch is pinned: pinning is for staging, and planning reads the commit it is at now anyway.
    const options = this.probe ? daemonPlanOptions(settings, () => nodesOfCluster(spec, settings, (this.pool ??= createNodePool(settings))), { pin: false }) : {};
    const planned = await planForCluster(spec, settings, options);
    this.budgets = planned.budgets;
    return identifyPlan(spec, settings, revision, planned);
  }

  async close(): Promise<void> {
    await this.pool?.close();
  }
}
