/**
 * Staging of one cluster, the same for the daemon and `shardctl stage`: every stage node gets the
 * files its layers need (or all, with `files = "all"`), the coordinator's node gets the config and
 * tokenizer, all verified. Every node is attempted; the result keeps each node's outcome, its
 * reason and whether retrying can help (a `path` source that is not a verified copy cannot), so the caller can stall or retry.
 */
import { engineOf } from "../engines/index.js";
import { filesForStage } from "../planner/index.js";
import type { ClusterSpec, Settings } from "../spec/index.js";
import { ShardctlError } from "../errors/index.js";
import {
  resolveHome,
  resolveManifest,
  stageCluster,
  stageFileList,
  type ClusterStagingResult,
  type NodeStagingRequest,
  type NodeStagingResult,
  type StagingOptions,
} from "../staging/index.js";
import type { NodeAccess } from "../nodes/index.js";
import type { ClusterNodes } from "./cluster-nodes.js";
import type { PlannedCluster } from "./plan-for-cluster.js";
import { stagingSourceOf } from "./staging-source.js";

export interface StagedCluster {
  /** The commit staged (a Hub branch resolved; the definition's revision otherwise). */
  commit: string | undefined;
  staged: NodeStagingResult[];
  failed: ClusterStagingResult["failed"];
  /** Model directory per node name (stage nodes and the coordinator's node) that reached present. */
  modelPaths: Map<string, string>;
  /** Bytes moved, all nodes together. */
  bytesTransferred: number;
}

export async function stageForCluster(
  spec: ClusterSpec,
  settings: Settings,
  planned: Pick<PlannedCluster, "plan" | "profile" | "pinned">,
  nodes: ClusterNodes,
  options: Pick<StagingOptions, "onProgress" | "signal" | "takeTurn"> = {},
): Promise<StagedCluster> {
  const { onProgress, signal, takeTurn } = options;
  const unpinned = stagingSourceOf(spec, settings);
  if (unpinned.kind === "path") {
    // Each stage node must hold every weight file its stage loads: an engine may leave a tensor whose
    // file is missing at random values without a word (mlx-lm does).
    const needs = new Map(planned.plan.stages.map((stage, i) => [nodes.stages[i]!, filesForStage(planned.profile, { ...stage, keepsEnds: keepsEnds(spec) })]));
    const sizes = new Map(planned.profile.files.map((f) => [f.path, f.sizeBytes]));
    return checkPathModel(unpinned.path, spec.model.revision, allNodesOf(nodes), needs, sizes);
  }
  const source = unpinned.kind === "hub" && planned.pinned !== undefined ? { ...unpinned, revision: planned.pinned.commit } : unpinned;
  const manifest = planned.pinned ?? (await resolveManifest(source));
  // Every node gets the small files (config, tokenizer, index); weights only where a stage needs them.
  const requests: NodeStagingRequest[] = planned.plan.stages.map((stage, i) => ({
    node: nodes.stages[i]!,
    files: spec.model.files === "all" ? "all" : stageFileList(manifest, filesForStage(planned.profile, { ...stage, keepsEnds: keepsEnds(spec) })),
  }));
  // The coordinator's node, unless it also holds a stage (and so already gets the small files).
  if (!nodes.stages.includes(nodes.coordinator)) requests.push({ node: nodes.coordinator, files: stageFileList(manifest, []) });
  const result = await stageCluster(requests, source, {
    verify: spec.model.verify,
    manifest,
    ...(onProgress === undefined ? {} : { onProgress }),
    ...(signal === undefined ? {} : { signal }),
    ...(takeTurn === undefined ? {} : { takeTurn }),
  });
  return {
    commit: manifest.commit,
    staged: result.staged,
    failed: result.failed,
    modelPaths: new Map(result.staged.map((s) => [s.node, s.modelPath])),
    bytesTransferred: result.staged.reduce((sum, s) => sum + s.bytesTransferred, 0),
  };
}

/**
 * The error a staging with failed nodes ends in: every failed node named, the first one's reason,
 * and terminal when any failure is (retrying cannot fix a file the Hub serves corrupt).
 */
export function stagingFailureOf(staged: StagedCluster): ShardctlError | undefined {
  if (staged.failed.length === 0) return undefined;
  const first = staged.failed.find((f) => f.terminal) ?? staged.failed[0]!;
  return new ShardctlError(
    first.reason,
    // A message that already begins with its node ("node n1 needs …") is not prefixed with it again.
    `staging failed on ${staged.failed.map((f) => f.node).join(", ")}: ${staged.failed.map((f) => (f.message.startsWith(`node ${f.node}`) ? f.message : `${f.node}: ${f.message}`)).join("; ")}`,
    { terminal: staged.failed.some((f) => f.terminal) },
  );
}

/** Stage nodes and the coordinator's node, each once. */
function allNodesOf(nodes: ClusterNodes): NodeAccess[] {
  return [...new Set([...nodes.stages, nodes.coordinator])];
}

/** source = "path": the nodes already hold the model there; check each has it, never write. */
async function checkPathModel(
  path: string,
  revision: string,
  nodes: NodeAccess[],
  needs: ReadonlyMap<NodeAccess, readonly string[]>,
  sizes: ReadonlyMap<string, number>,
): Promise<StagedCluster> {
  const staged: NodeStagingResult[] = [];
  const failed: ClusterStagingResult["failed"] = [];
  for (const node of nodes) {
    const resolved = await resolveHome(node, path);
    const wrong = await findWrongFiles(node, resolved, needs.get(node) ?? [], sizes);
    if (wrong.length > 0) {
      const listed = wrong.slice(0, 5).join(", ") + (wrong.length > 5 ? ` and ${wrong.length - 5} more` : "");
      failed.push({
        node: node.config.name,
        reason: "ModelFilesMissing",
        message: `the model at ${resolved} lacks what this node's stage loads: ${listed}; source = "path" never copies files`,
        terminal: true,
      });
    } else if ((await node.stat(`${resolved}/config.json`))?.type === "file") {
      staged.push({ node: node.config.name, before: "present", bytesTransferred: 0, filesTransferred: 0, hashedFiles: 0, modelPath: resolved });
    } else {
      failed.push({
        node: node.config.name,
        reason: "ModelPathMissing",
        message: `no model at ${resolved} (config.json missing); source = "path" never copies files`,
        terminal: true,
      });
    }
  }
  return { commit: revision, staged, failed, modelPaths: new Map(staged.map((s) => [s.node, s.modelPath])), bytesTransferred: 0 };
}

/** Whether every stage of the definition's engine keeps the embedding, final norm and lm_head. */
function keepsEnds(spec: ClusterSpec): boolean {
  return engineOf(spec.engine.kind).nonLayerTensors === "every-stage";
}

/** The weight files of `files` missing under `dir` on `node`, or of another size than the model's (as "<file> (n bytes, expected m)"). */
async function findWrongFiles(node: NodeAccess, dir: string, files: readonly string[], sizes: ReadonlyMap<string, number>): Promise<string[]> {
  const found = await Promise.all(files.map(async (file) => ({ file, stat: await node.stat(`${dir}/${file}`) })));
  return found.flatMap(({ file, stat }) => {
    if (stat?.type !== "file") return [`${file} (missing)`];
    const expected = sizes.get(file);
    return expected === undefined || stat.size === expected ? [] : [`${file} (${stat.size} bytes, expected ${expected})`];
  });
}
