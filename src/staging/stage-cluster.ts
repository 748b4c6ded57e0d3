/**
 * Stage a model on many nodes at once. Every node is attempted; the result says which reached
 * "present" and which failed (and why), so the next pass retries only those.
 */
import type { NodeAccess } from "../nodes/index.js";
import { isShardctlError, ShardctlError } from "../errors/index.js";
import { fetchHubManifest, hashLocalManifest } from "./manifest.js";
import { stageNode } from "./stage-node.js";
import type { Manifest, NodeStageResult, StageOptions, StagingSource } from "./types.js";

export interface NodeStageRequest {
  node: NodeAccess;
  /** Files this node's stage needs, or "all". */
  files: string[] | "all";
}

export interface ClusterStageResult {
  manifest: Manifest;
  staged: NodeStageResult[];
  failed: Array<{ node: string; reason: string; message: string }>;
}

/** The pinned file list of a source ("path" sources need one given by the caller). */
export async function resolveManifest(source: StagingSource): Promise<Manifest> {
  if (source.kind === "hub") return fetchHubManifest({ endpoint: source.endpoint, repo: source.repo, revision: source.revision, token: source.token });
  if (source.kind === "push") return hashLocalManifest(source.dir, source.repo, source.revision);
  throw new ShardctlError("ManifestRequired", `source "path" has no file list of its own; pass the manifest the model was planned from`, { terminal: true });
}

export async function stageCluster(
  requests: NodeStageRequest[],
  source: StagingSource,
  options: Omit<StageOptions, "files"> & { manifest?: Manifest } = {},
): Promise<ClusterStageResult> {
  const manifest = options.manifest ?? (await resolveManifest(source));
  const outcomes = await Promise.allSettled(requests.map((r) => stageNode(r.node, source, manifest, { ...options, files: r.files })));
  const result: ClusterStageResult = { manifest, staged: [], failed: [] };
  for (const [i, outcome] of outcomes.entries()) {
    if (outcome.status === "fulfilled") result.staged.push(outcome.value);
    else {
      const error = outcome.reason as unknown;
      result.failed.push({
        node: requests[i]!.node.config.name,
        reason: isShardctlError(error) ? error.reason : "StagingFailed",
        message: error instanceof Error ? error.message : String(error),
      });
    }
  }
  return result;
}
