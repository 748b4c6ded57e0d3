/**
 * `shardctl stage <cluster> [--json] [--config shardctl.toml] [--dir clusters]`: run staging on its
 * own. Plans the cluster, then brings every stage's node to "present" for the files its stage needs
 * (or all files with `files = "all"`), with progress bars on a TTY. Exit 0 when every node is
 * present, 1 otherwise.
 */
import { access } from "node:fs/promises";
import { basename } from "node:path";
import { parseArgs } from "node:util";
import { filesForStage, formatBytes, planCluster } from "../../planner/index.js";
import { loadCluster, formatIssue, type ClusterSpec } from "../../spec/index.js";
import { ShardctlError } from "../../errors/index.js";
import {
  fetchHubManifest,
  hashLocalManifest,
  stageCluster,
  stageFileList,
  type Manifest,
  type StageProgress,
  type StagingSource,
} from "../../staging/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { UsageError } from "../usage-error.js";
import { stagingSourceOf } from "../../reconciler/stage-model.js";
import { createNodePool } from "../../reconciler/node-configs.js";

export const summary = "stage a cluster's model files onto its nodes (download or push, verify)";

const usage = `usage: shardctl stage <cluster|file> [--json] [--config shardctl.toml] [--dir clusters]
  Brings every node of the cluster to "present": the files its stage needs, verified by sha256,
  in the Hugging Face cache layout under the node's model_dir.`;

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { ...contextOptions, json: { type: "boolean" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  if (positionals.length !== 1) throw new UsageError(`expected one cluster\n${usage}`);
  const context = await loadContext(values);
  const file = await resolveClusterFile(positionals[0]!, context.clustersDir);
  const loaded = await loadCluster(file, context.settings);
  if (!loaded.ok) {
    for (const issue of loaded.issues) console.error(formatIssue(issue));
    return 1;
  }
  const spec = loaded.value;
  const settings = context.settings;
  if (!settings.distributed.enabled) {
    console.error(`note: [distributed] enabled = false in ${settings.file}: the daemon stages nothing; staging anyway because you asked`);
  }

  // The file list first (a Hub branch resolved to its commit once), then the plan from that same
  // commit: which layers, hence which files, each node needs.
  const unpinned = stagingSourceOf(spec, settings);
  const manifest = await manifestOf(unpinned, spec);
  const source = unpinned.kind === "hub" ? { ...unpinned, revision: manifest.commit } : unpinned;
  const { profile, plan } = await planCluster(spec, settings, {}, source.kind === "hub" ? manifest.commit : undefined);
  if (!plan.feasible) {
    for (const e of plan.errors) console.error(`${spec.name}: ${e.reason}: ${e.message}`);
    return 1;
  }

  const pool = createNodePool(settings);
  const bars = createBars(plan.stages.map((s) => s.node), !values.json && process.stdout.isTTY === true);
  try {
    const requests = plan.stages.map((stage) => {
      const entry = settings.nodes[stage.node];
      if (entry === undefined) throw new ShardctlError("UnknownNode", `${spec.name}: node ${stage.node} is not in the registry`, { terminal: true });
      return {
        node: pool.get(entry),
        files: spec.model.files === "all" ? ("all" as const) : stageFileList(manifest, filesForStage(profile, stage)),
      };
    });
    const result = await stageCluster(requests, source, { manifest, verify: spec.model.verify, onProgress: bars.update });
    bars.finish();
    if (values.json) {
      console.log(JSON.stringify({ cluster: spec.name, commit: manifest.commit, staged: result.staged, failed: result.failed }, null, 2));
    } else {
      for (const s of result.staged) {
        console.log(`${s.node}: present (was ${s.before}; ${formatBytes(s.bytesTransferred)} in ${s.filesTransferred} files, ${s.hashedFiles} hashed) at ${s.modelPath}`);
      }
      for (const f of result.failed) console.log(`${f.node}: FAILED ${f.reason}: ${f.message}`);
    }
    return result.failed.length === 0 ? 0 : 1;
  } finally {
    await pool.close();
  }
}

async function manifestOf(source: StagingSource, spec: ClusterSpec): Promise<Manifest> {
  if (source.kind === "hub") return fetchHubManifest(source);
  if (source.kind === "push") return hashLocalManifest(source.dir, source.repo, source.revision);
  // "path": the expected hashes come from a copy the control machine can read (the same path).
  const readable = await access(source.path).then(
    () => true,
    () => false,
  );
  if (!readable) {
    throw new ShardctlError("ModelNotInspectable", `${spec.file}: source "path" ${source.path} is not readable here, so there is nothing to verify the nodes' copies against`, {
      terminal: true,
    });
  }
  return hashLocalManifest(source.path, `local/${basename(source.path)}`, spec.model.revision);
}

/** One progress bar per node, redrawn in place on a TTY; otherwise nothing until the summary. */
function createBars(nodes: string[], tty: boolean): { update: (e: StageProgress) => void; finish: () => void } {
  const latest = new Map<string, StageProgress>();
  let drawn = 0;
  const width = Math.max(...nodes.map((n) => n.length));
  const draw = (): void => {
    if (drawn > 0) process.stdout.write(`\x1b[${drawn}A`);
    for (const node of nodes) {
      const e = latest.get(node);
      const fraction = e === undefined || e.bytesTotal === 0 ? (e?.phase === "done" ? 1 : 0) : e.bytesDone / e.bytesTotal;
      const filled = Math.round(fraction * 30);
      const detail =
        e === undefined
          ? "waiting"
          : `${e.phase.padEnd(8)} ${formatBytes(e.bytesDone)}/${formatBytes(e.bytesTotal)} ${formatBytes(e.rateBytesPerSec)}/s` +
            (e.etaSec === undefined || e.phase === "done" ? "" : ` ETA ${Math.ceil(e.etaSec)}s`);
      process.stdout.write(`\x1b[2K${node.padEnd(width)} [${"#".repeat(filled)}${" ".repeat(30 - filled)}] ${detail}\n`);
    }
    drawn = nodes.length;
  };
  return {
    update: (e) => {
      latest.set(e.node, e);
      if (tty) draw();
    },
    finish: () => {
      if (tty) draw();
    },
  };
}
