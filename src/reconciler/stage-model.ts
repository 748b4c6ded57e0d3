/**
 * The staging step of a pass: every stage node gets the files its layers need (or all, with
 * `files = "all"`), the coordinator's node gets the config and tokenizer, all verified. Returns
 * the model path on each node; a node that failed is named in the error and retried next pass.
 */
import { basename } from "node:path";
import type { NodeAccess } from "../nodes/index.js";
import { filesForStage, type ModelProfile, type ShardPlan } from "../planner/index.js";
import type { ClusterSpec, Settings } from "../spec/index.js";
import { ShardctlError } from "../errors/index.js";
import { resolveHome, resolveManifest, stageCluster, stageFileList, type Manifest, type NodeStageRequest, type StageProgress, type StagingSource } from "../staging/index.js";

export interface StagedModel {
  /** Model directory per node name (stage nodes and the coordinator's node). */
  modelPaths: Map<string, string>;
  /** Bytes moved by this pass, all nodes together. */
  bytesTransferred: number;
}

export function stagingSourceOf(spec: ClusterSpec, settings: Settings, env: NodeJS.ProcessEnv = process.env): StagingSource {
  if (spec.model.source === "hub") {
    const token = env[settings.hub.tokenEnv];
    return { kind: "hub", endpoint: settings.hub.endpoint, repo: spec.model.id, revision: spec.model.revision, ...(token ? { token } : {}) };
  }
  if (spec.model.source === "push") {
    // Pushed models are cached under a repository name of their own: local/<directory name>.
    return { kind: "push", dir: spec.model.path ?? spec.model.id, repo: `local/${basename(spec.model.path ?? spec.model.id)}`, revision: spec.model.revision };
  }
  return { kind: "path", path: spec.model.path ?? spec.model.id };
}

export async function stageModel(
  spec: ClusterSpec,
  settings: Settings,
  plan: ShardPlan,
  profile: ModelProfile,
  nodes: { stages: NodeAccess[]; coordinator: NodeAccess },
  onProgress: (event: StageProgress) => void,
  /** The file list the plan was made from (a Hub branch pinned to its commit at planning). */
  pinned?: Manifest,
): Promise<StagedModel> {
  const unpinned = stagingSourceOf(spec, settings);
  if (unpinned.kind === "path") return verifyPathModel(unpinned.path, [...nodes.stages, nodes.coordinator]);
  const source = unpinned.kind === "hub" && pinned !== undefined ? { ...unpinned, revision: pinned.commit } : unpinned;
  const manifest = pinned ?? (await resolveManifest(source));
  // Every node gets the small files (config, tokenizer, index); weights only where a stage needs them.
  const requests: NodeStageRequest[] = plan.stages.map((stage, i) => ({
    node: nodes.stages[i]!,
    files: spec.model.files === "all" ? "all" : stageFileList(manifest, filesForStage(profile, stage)),
  }));
  // The coordinator's node, unless it also holds a stage (and so already gets the small files).
  if (!nodes.stages.includes(nodes.coordinator)) requests.push({ node: nodes.coordinator, files: stageFileList(manifest, []) });

  const result = await stageCluster(requests, source, { verify: spec.model.verify, onProgress, manifest });
  if (result.failed.length > 0) {
    const first = result.failed[0]!;
    throw new ShardctlError(
      first.reason,
      `staging failed on ${result.failed.map((f) => f.node).join(", ")}: ${result.failed.map((f) => `${f.node}: ${f.message}`).join("; ")}`,
    );
  }
  return {
    modelPaths: new Map(result.staged.map((s) => [s.node, s.modelPath])),
    bytesTransferred: result.staged.reduce((sum, s) => sum + s.bytesTransferred, 0),
  };
}

/** source = "path": the nodes already hold the model there; check, never write. */
async function verifyPathModel(path: string, nodes: NodeAccess[]): Promise<StagedModel> {
  const modelPaths = new Map<string, string>();
  for (const node of nodes) {
    const resolved = await resolveHome(node, path);
    if ((await node.stat(`${resolved}/config.json`))?.type !== "file") {
      throw new ShardctlError("ModelPathMissing", `node ${node.config.name} has no model at ${resolved} (config.json missing); source = "path" never copies files`, { terminal: true });
    }
    modelPaths.set(node.config.name, resolved);
  }
  return { modelPaths, bytesTransferred: 0 };
}
