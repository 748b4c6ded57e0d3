/**
 * `shardctl plan <cluster…> [--json|--markdown] [--detailed-exitcode]`: the read-only planning
 * preview. Exit 0 when every plan is feasible, 1 when a definition is invalid or a plan infeasible;
 * with --detailed-exitcode, 2 when a feasible plan differs from what the status file records.
 */
import { relative } from "node:path";
import { parseArgs } from "node:util";
import { createNodePool, describeBudgets, nodesOfCluster, planForCluster, type PlannedCluster } from "../../cluster/index.js";
import { isShardctlError, messageOf, showText } from "../../errors/index.js";
import { budgetSourceLabels, codeSpan, formatBytes, renderPlanMarkdown, renderPlanText, type BudgetSource, type ShardPlan } from "../../planner/index.js";
import { readStatus, statusFileFor, type ClusterStatus } from "../../reconciler/index.js";
import { formatIssue, loadCluster, type ClusterSpec, type Settings } from "../../spec/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";
import { wantsColour } from "../pretty-log.js";

const usage = usageOf("plan");

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      ...contextOptions,
      json: { type: "boolean" },
      markdown: { type: "boolean" },
      "detailed-exitcode": { type: "boolean" },
      probe: { type: "boolean" },
    },
  });
  if (values.json && values.markdown) throw new UsageError("choose one of --json and --markdown");
  if (positionals.length === 0) throw new UsageError(`expected at least one cluster\n${usage}`);
  const context = await loadContext(values);

  let invalid = false;
  let changed = false;
  const results: Array<{ cluster: string; file: string; plan?: ShardPlan; budgets?: BudgetsNote; errors?: string[] }> = [];
  for (const ref of positionals) {
    const file = await resolveClusterFile(ref, context.clustersDir);
    const shown = relative(process.cwd(), file) || file;
    const loaded = await loadCluster(file, context.settings);
    if (!loaded.ok) {
      invalid = true;
      results.push({ cluster: ref, file: shown, errors: loaded.issues.map((i) => formatIssue({ ...i, file: shown })) });
      continue;
    }
    const spec = loaded.value;
    try {
      // --probe: the budgets the daemon plans with (what the nodes report, capped by what they declare).
      const planned = await planWith(spec, context.settings, values.probe === true);
      const { plan } = planned;
      const statusFile = statusFileFor(file);
      const read = await readStatus(statusFile).then(
        (status) => ({ status, error: undefined }),
        (error: unknown) => ({ status: undefined, error }),
      );
      const { status } = read;
      if (!plan.feasible) invalid = true;
      const difference = plan.feasible ? differenceFromStatus(status, plan, relative(process.cwd(), statusFile) || statusFile, read.error) : undefined;
      if (difference !== undefined) {
        changed = true;
        // Exit 2 alone does not say whether the split moved or there was nothing to compare with.
        if (values["detailed-exitcode"]) console.error(showText(`plan of ${spec.name}: ${difference}`));
      }
      results.push({ cluster: spec.name, file: shown, plan, budgets: budgetsNote(planned, context.settings, status) });
    } catch (error) {
      if (!isShardctlError(error)) throw error;
      invalid = true;
      results.push({ cluster: spec.name, file: shown, errors: [`${shown}: ${error.reason}: ${error.message}`] });
    }
  }

  // A plan quotes the model (its config.json, tensor and file names) and definitions quote their
  // files: shown, never obeyed by the terminal (showText) nor rendered by a Markdown viewer (codeSpan).
  if (values.json) {
    // JSON leaves DEL, C1 controls and bidi overrides raw; escaped, the document parses the same.
    console.log(showText(JSON.stringify(results.length === 1 ? results[0] : results, null, 2), { keepLines: true }));
  } else {
    for (const result of results) {
      if (values.markdown) console.log(`### Cluster ${codeSpan(result.cluster)}\n`);
      else console.log(showText(`cluster ${result.cluster} (${result.file})`));
      if (result.plan !== undefined) {
        console.log(values.markdown ? renderPlanMarkdown(result.plan) : renderPlanText(result.plan, { color: wantsColour(process.env, process.stdout) }));
        if (result.budgets !== undefined) for (const line of renderBudgetsNote(result.budgets)) console.log(values.markdown ? `${showText(line)}\n` : showText(line));
      }
      for (const line of result.errors ?? []) console.log(values.markdown ? `- ${codeSpan(line)}` : showText(line));
      console.log("");
    }
  }
  if (invalid) return 1;
  return values["detailed-exitcode"] && changed ? 2 : 0;
}

/** The plan the daemon would make; with `probe`, over a node pool closed afterwards. */
async function planWith(spec: ClusterSpec, settings: Settings, probe: boolean): Promise<PlannedCluster> {
  if (!probe) return planForCluster(spec, settings);
  const pool = createNodePool(settings);
  try {
    return await planForCluster(spec, settings, { probe: nodesOfCluster(spec, settings, pool) });
  } finally {
    await pool.close();
  }
}

/**
 * Where a plan's budgets came from, and — for a plan of the declared figures only — the budgets of
 * the daemon's own plan as its status file records them (the daemon probes; this did not).
 */
interface BudgetsNote {
  from: PlannedCluster["budgets"];
  rule: string;
  daemon?: { revision: string; stages: Array<{ index: number; node: string; budgetBytes: number | null; budgetSource: BudgetSource | null }> };
}

function budgetsNote(planned: PlannedCluster, settings: Settings, status: ClusterStatus | undefined): BudgetsNote {
  const daemon =
    planned.budgets === "declared" && status?.plan !== undefined
      ? {
          revision: status.observedRevision,
          stages: status.plan.stages.map((s) => ({ index: s.index, node: s.node, budgetBytes: s.budgetBytes, budgetSource: s.budgetSource ?? null })),
        }
      : undefined;
  return { from: planned.budgets, rule: describeBudgets(planned, settings), ...(daemon === undefined ? {} : { daemon }) };
}

function renderBudgetsNote(note: BudgetsNote): string[] {
  const lines = [`budgets: ${note.rule}`];
  if (note.daemon !== undefined) {
    const stages = note.daemon.stages.map(
      (s) =>
        `stage ${s.index} on ${showText(s.node)} ${s.budgetBytes === null ? "unknown" : formatBytes(s.budgetBytes)} (${s.budgetSource === null ? "no figure" : budgetSourceLabels[s.budgetSource]})`,
    );
    lines.push(`the daemon's plan of revision ${note.daemon.revision.slice(0, 12)} budgeted: ${stages.join(", ")}`);
  }
  return lines;
}

/**
 * How `plan` differs from the plan the status file records (its nodes or layer ranges), in words;
 * undefined when it does not. No status file, an unreadable one and one without a plan all count
 * as different: there is nothing the plan is known to match.
 */
function differenceFromStatus(status: ClusterStatus | undefined, plan: ShardPlan, statusFile: string, readError: unknown): string | undefined {
  if (readError !== undefined) return `there is no plan to compare with: ${messageOf(readError)}`;
  if (status === undefined) return `there is no status file to compare with (${statusFile}): no daemon has planned this cluster yet`;
  const recorded = status.plan?.stages;
  if (recorded === undefined) return `${statusFile} records no plan to compare with`;
  const shape = (stages: ReadonlyArray<{ node: string; layers: readonly number[] }>): string => stages.map((s) => `${s.node} ${s.layers[0]}-${s.layers[1]}`).join(", ");
  const [before, after] = [shape(recorded), shape(plan.stages)];
  return before === after ? undefined : `the split differs from the one ${statusFile} records: ${before} → ${after}`;
}
