/**
 * Stage a model on many nodes at once. Every node is attempted; the result says which reached
 * "present" and which failed, why, and whether retrying can help, so the next pass retries only
 * those and a caller can stall on a failure that would only repeat (a full disk).
 */
import type { NodeAccess } from "../nodes/index.js";
import { isShardctlError, messageOf, ShardctlError, type Reason } from "../errors/index.js";
import { fetchHubManifest, hashLocalManifest } from "./manifest.js";
import { stageNode } from "./stage-node.js";
import type { Manifest, NodeStagingResult, StagingOptions, StagingSource } from "./types.js";

export interface NodeStagingRequest {
  node: NodeAccess;
  /** Files this node's stage needs, or "all". */
  files: string[] | "all";
}

export interface ClusterStagingResult {
  manifest: Manifest;
  staged: NodeStagingResult[];
  failed: NodeStagingFailure[];
}

/** A node that did not reach "present". */
export interface NodeStagingFailure {
  node: string;
  /** The ShardctlError's reason; "StagingFailed" for any other error. */
  reason: Reason;
  message: string;
  /** True when retrying would only repeat the failure (the ShardctlError's `terminal`; false for any other error). */
  terminal: boolean;
}

/** The pinned file list of a source ("path" sources need one given by the caller). */
export async function resolveManifest(source: StagingSource): Promise<Manifest> {
  if (source.kind === "hub") return fetchHubManifest({ endpoint: source.endpoint, repo: source.repo, revision: source.revision, token: source.token });
  if (source.kind === "push") return hashLocalManifest(source.dir, source.repo, source.revision);
  throw new ShardctlError("ManifestRequired", `source "path" has no file list of its own; pass the manifest the model was planned from`, { terminal: true });
}

export async function stageCluster(
  requests: NodeStagingRequest[],
  source: StagingSource,
  options: Omit<StagingOptions, "files"> & { manifest?: Manifest } = {},
): Promise<ClusterStagingResult> {
  const manifest = options.manifest ?? (await resolveManifest(source));
  const outcomes = await Promise.allSettled(requests.map((r) => stageNode(r.node, source, manifest, { ...options, files: r.files })));
  const result: ClusterStagingResult = { manifest, staged: [], failed: [] };
  for (const [i, outcome] of outcomes.entries()) {
    if (outcome.status === "fulfilled") result.staged.push(outcome.value);
    else {
      const error = outcome.reason as unknown;
      const node = requests[i]!.node.config.name;
      // A disk that filled during the transfer (the free-space check passed: another node or process
      // shares the disk) is retried as one found too small is: the retry's free-space check refuses
      // before any byte moves, until space is freed there.
      if (isDiskFull(error)) {
        result.failed.push({
          node,
          reason: "InsufficientDisk",
          message: `node ${node}: the disk at its model_dir filled up while staging: ${messageOf(error)}; tried again with back-off, at most a minute apart (the partial file is kept)`,
          terminal: false,
        });
        continue;
      }
      result.failed.push({
        node,
        reason: isShardctlError(error) ? error.reason : "StagingFailed",
        message: messageOf(error),
        terminal: isShardctlError(error) && error.terminal,
      });
    }
  }
  return result;
}

/** Whether `error`, or an error it was caused by, is a full disk (ENOSPC locally, "No space left on device" from a node). */
function isDiskFull(error: unknown): boolean {
  for (let e: unknown = error, depth = 0; e instanceof Error && depth < 8; e = e.cause, depth++) {
    if ((e as NodeJS.ErrnoException).code === "ENOSPC" || /ENOSPC|No space left on device/i.test(e.message)) return true;
  }
  return false;
}
