/**
 * The Hugging Face cache layout under a node's model_dir:
 * models--{org}--{name}/blobs/<hash>, snapshots/<commit>/<path> → relative links into blobs,
 * refs/<branch> holding the commit, partial downloads as blobs/<hash>.incomplete.
 */
import { posix } from "node:path";

export function repoFolder(modelDir: string, repo: string): string {
  return posix.join(modelDir, `models--${repo.split("/").join("--")}`);
}

export function blobPath(modelDir: string, repo: string, hash: string): string {
  return posix.join(repoFolder(modelDir, repo), "blobs", hash);
}

export function incompletePath(modelDir: string, repo: string, hash: string): string {
  return `${blobPath(modelDir, repo, hash)}.incomplete`;
}

export function snapshotDir(modelDir: string, repo: string, commit: string): string {
  return posix.join(repoFolder(modelDir, repo), "snapshots", commit);
}

export function snapshotPath(modelDir: string, repo: string, commit: string, path: string): string {
  return posix.join(snapshotDir(modelDir, repo, commit), path);
}

/** The relative link target from snapshots/<commit>/<path> to blobs/<hash>. */
export function linkTarget(path: string, hash: string): string {
  const depth = path.split("/").length - 1;
  return `${"../".repeat(depth + 2)}blobs/${hash}`;
}

export function refPath(modelDir: string, repo: string, ref: string): string {
  return posix.join(repoFolder(modelDir, repo), "refs", ref);
}

export function statCachePath(modelDir: string, repo: string): string {
  return posix.join(repoFolder(modelDir, repo), ".shardctl-stat-cache.json");
}
