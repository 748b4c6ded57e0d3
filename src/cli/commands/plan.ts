/**
 * `shardctl plan <cluster…> [--json|--markdown] [--detailed-exitcode]`: the read-only planning
 * preview. Exit 0 when every plan is feasible, 1 when a definition is invalid or a plan infeasible;
 * with --detailed-exitcode, 2 when a feasible plan differs from what the status file records.
 */
import { relative } from "node:path";
import { parseArgs } from "node:util";
import { createNodePool, describeBudgets, nodesOfCluster, planForCluster, type PlannedCluster } from "../../cluster/index.js";
import { isShardctlError } from "../../errors/index.js";
import { renderPlanMarkdown, renderPlanText, type ShardPlan } from "../../planner/index.js";
import { readStatus, statusFileFor } from "../../reconciler/index.js";
import { formatIssue, loadCluster, type ClusterSpec, type Settings } from "../../spec/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { UsageError } from "../usage-error.js";

export const summary = "preview the shard plan of cluster definitions (read-only)";

const usage = `usage: shardctl plan <cluster|file>... [--json | --markdown] [--detailed-exitcode] [--probe]
       [--config shardctl.toml] [--dir clusters]
  Budgets come from the registry's declared memory; --probe asks the nodes (free memory, accelerator,
  engine version) as the daemon does when distributed serving is on.
  Exit 0 when every plan is feasible, 1 when a definition is invalid or a plan is infeasible,
  2 (with --detailed-exitcode) when a plan differs from the one its status file records.`;

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
      help: { type: "boolean", short: "h" },
    },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  if (values.json && values.markdown) throw new UsageError("choose one of --json and --markdown");
  if (positionals.length === 0) throw new UsageError(`expected at least one cluster\n${usage}`);
  const context = await loadContext(values);

  let invalid = false;
  let changed = false;
  const results: Array<{ cluster: string; file: string; plan?: ShardPlan; errors?: string[] }> = [];
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
      // --probe: the budgets the daemon plans with (probed free memory), not the declared ones.
      const { plan } = await planWith(spec, context.settings, values.probe === true);
      if (!plan.feasible) invalid = true;
      if (plan.feasible && (await differsFromStatus(file, plan))) changed = true;
      results.push({ cluster: spec.name, file: shown, plan });
    } catch (error) {
      if (!isShardctlError(error)) throw error;
      invalid = true;
      results.push({ cluster: spec.name, file: shown, errors: [`${shown}: ${error.reason}: ${error.message}`] });
    }
  }

  if (values.json) {
    console.log(JSON.stringify(results.length === 1 ? results[0] : results, null, 2));
  } else {
    for (const result of results) {
      if (values.markdown) console.log(`### Cluster \`${result.cluster}\`\n`);
      else console.log(`cluster ${result.cluster} (${result.file})`);
      if (result.plan !== undefined) {
        console.log(values.markdown ? renderPlanMarkdown(result.plan) : renderPlanText(result.plan, { color: process.stdout.isTTY }));
        console.log(`budgets: ${describeBudgets({ budgets: values.probe ? "probed" : "declared" })}`);
      }
      for (const line of result.errors ?? []) console.log(values.markdown ? `- ${line}` : line);
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
    return await planForCluster(spec, settings, { probe: nodesOfCluster(spec, settings, pool).stages });
  } finally {
    await pool.close();
  }
}

/** True when the status file records a plan whose nodes or layer ranges differ from `plan`. */
async function differsFromStatus(definitionFile: string, plan: ShardPlan): Promise<boolean> {
  const status = await readStatus(statusFileFor(definitionFile)).catch(() => undefined);
  const recorded = status?.plan?.stages;
  if (recorded === undefined) return true;
  const shape = (stages: ReadonlyArray<{ node: string; layers: readonly number[] }>): string => JSON.stringify(stages.map((s) => [s.node, s.layers[0], s.layers[1]]));
  return shape(recorded) !== shape(plan.stages);
}
