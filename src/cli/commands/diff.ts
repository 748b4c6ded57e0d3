/**
 * `shardctl diff [file…]`: what the daemon would do — desired (definitions) vs observed (the
 * ledger of what runs). Exit 0 when nothing differs, 2 when something does, 1 on an error.
 */
import { basename, relative } from "node:path";
import { parseArgs } from "node:util";
import { Ledger } from "../../launch/index.js";
import { planCluster } from "../../planner/index.js";
import { launchIdentity } from "../../reconciler/launch-identity.js";
import { computeRevision, findClusterFiles, formatIssue, loadCluster, type ClusterSpec, type Settings } from "../../spec/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";

/** The launch identity the daemon would compute (undefined when the model cannot be planned now). */
async function identityOf(spec: ClusterSpec, settings: Settings): Promise<string | undefined> {
  try {
    return launchIdentity(spec, settings, (await planCluster(spec, settings)).plan);
  } catch {
    return undefined;
  }
}

export const summary = "show what differs between the definitions and what runs (exit 2 when something does)";

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...contextOptions } });
  const context = await loadContext(values);
  const ledger = new Ledger(context.settings.daemon.stateDir);
  const files = positionals.length > 0
    ? await Promise.all(positionals.map((p) => resolveClusterFile(p, context.clustersDir)))
    : await findClusterFiles(context.clustersDir);

  let errors = 0;
  const changes: string[] = [];
  for (const file of files) {
    const name = basename(file, ".toml");
    const loaded = await loadCluster(file, context.settings);
    if (!loaded.ok) {
      for (const issue of loaded.issues) console.error(formatIssue({ ...issue, file: relative(process.cwd(), issue.file) || issue.file }));
      errors++;
      continue;
    }
    const spec = loaded.value;
    const revision = computeRevision(spec, context.settings).slice(0, 12);
    const running = await ledger.read(name);
    const wantsRunning = spec.desired === "running" && context.settings.distributed.enabled;
    if (spec.suspend) continue;
    if (wantsRunning && running === undefined) changes.push(`+ ${name}: launch revision ${revision}`);
    else if (wantsRunning && running !== undefined && running.revision.slice(0, 12) !== revision) {
      // As the daemon decides: the same launch identity is applied in place, anything else replaces.
      const inPlace = running.identity !== undefined && running.identity === (await identityOf(spec, context.settings));
      changes.push(
        inPlace
          ? `~ ${name}: apply revision ${revision} in place (router registration only, no restart)`
          : `~ ${name}: replace revision ${running.revision.slice(0, 12)} with ${revision}`,
      );
    } else if (wantsRunning && running?.phase !== "running" && running !== undefined) {
      changes.push(`~ ${name}: finish ${running.phase === "launching" ? "an interrupted launch" : "an interrupted teardown"}, then launch`);
    } else if (!wantsRunning && running !== undefined) {
      changes.push(`- ${name}: stop (${spec.desired === "stopped" ? 'desired = "stopped"' : "distributed serving is disabled"})`);
    }
  }
  // What runs without a definition is pruned (only when looking at the whole directory).
  if (positionals.length === 0) {
    const defined = new Set(files.map((f) => basename(f, ".toml")));
    for (const entry of await ledger.list()) {
      if (!defined.has(entry.cluster)) changes.push(`- ${entry.cluster}: prune (its definition is gone)`);
    }
  }
  for (const line of changes) console.log(line);
  if (errors > 0) return 1;
  if (changes.length === 0) console.log("no differences");
  return changes.length > 0 ? 2 : 0;
}
