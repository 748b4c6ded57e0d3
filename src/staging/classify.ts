/**
 * Classify a node against a manifest: present (every needed file there and verified), needs-download
 * (some missing or partial), mismatched (a file with the wrong size or hash). Three stat round trips
 * and one stat-cache read, hashing only what the cache cannot vouch for.
 */
import type { NodeAccess } from "../nodes/index.js";
import { blobPath, incompletePath, snapshotPath, statCachePath } from "./cache-layout.js";
import { gitBlobSha1 } from "./manifest.js";
import { cacheHit, readStatCache, updateStatCache, type StatCache } from "./stat-cache.js";
import type { FileCheck, Manifest, ManifestFile, NodeClassification } from "./types.js";

export interface ClassifyOptions {
  verify?: "fast" | "full";
  /** Stops the hashing of a file when aborted (the classification then rejects with an AbortError). */
  signal?: AbortSignal;
}

/** Where each file lives on the node: the HF cache under model_dir, or a plain folder (source "path"). */
export type Layout = { kind: "cache"; modelDir: string } | { kind: "plain"; dir: string };

export async function classifyNode(node: NodeAccess, manifest: Manifest, layout: Layout, options: ClassifyOptions = {}): Promise<NodeClassification> {
  const files = manifest.files;
  const dataPaths = files.map((f) => dataPath(layout, manifest, f));
  const ask = options.signal === undefined ? {} : { signal: options.signal };
  const [stats, partials, links] = await Promise.all([
    node.statMany(dataPaths, ask),
    layout.kind === "cache"
      ? node.statMany(
          files.map((f) => incompletePath(layout.modelDir, manifest.repo, f.hash)),
          ask,
        )
      : Promise.resolve(files.map(() => undefined)),
    layout.kind === "cache"
      ? node.statMany(
          files.map((f) => snapshotPath(layout.modelDir, manifest.repo, manifest.commit, f.path)),
          ask,
        )
      : Promise.resolve([]),
  ]);
  const cachePath = layout.kind === "cache" ? statCachePath(layout.modelDir, manifest.repo) : undefined;
  const cache: StatCache = cachePath === undefined ? {} : await readStatCache(node, cachePath);
  let hashedFiles = 0;
  const verified: StatCache = {};

  const checks: FileCheck[] = [];
  for (const [i, file] of files.entries()) {
    const stat = stats[i];
    const path = dataPaths[i]!;
    const linkStat = links[i];
    const linkMissing = layout.kind === "cache" && (linkStat === undefined || linkStat.ino !== stat?.ino);
    if (stat === undefined || stat.type !== "file") {
      const partial = partials[i];
      checks.push(partial === undefined ? { file, state: "missing", haveBytes: 0, linkMissing } : { file, state: "partial", haveBytes: partial.size, linkMissing });
      continue;
    }
    if (stat.size !== file.size) {
      checks.push({ file, state: "mismatched", haveBytes: 0, mismatchedBytes: stat.size, linkMissing });
      continue;
    }
    if (options.verify !== "full" && cacheHit(cache[path], stat, file.hash)) {
      checks.push({ file, state: "present", haveBytes: file.size, linkMissing });
      continue;
    }
    hashedFiles++;
    const good = (await hashOnNode(node, path, file, options.signal)) === file.hash;
    if (good && cachePath !== undefined) {
      verified[path] = { size: stat.size, mtimeSec: stat.mtimeSec, ctimeSec: stat.ctimeSec, ino: stat.ino, hash: file.hash };
    }
    checks.push(
      good ? { file, state: "present", haveBytes: file.size, linkMissing } : { file, state: "mismatched", haveBytes: 0, mismatchedBytes: stat.size, linkMissing },
    );
  }
  if (Object.keys(verified).length > 0 && cachePath !== undefined) await updateStatCache(node, cachePath, verified);
  const state = checks.some((c) => c.state === "mismatched") ? "mismatched" : checks.some((c) => c.state !== "present" || c.linkMissing) ? "needs-download" : "present";
  return { node: node.config.name, state, files: checks, hashedFiles };
}

export function dataPath(layout: Layout, manifest: Manifest, file: ManifestFile): string {
  return layout.kind === "cache" ? blobPath(layout.modelDir, manifest.repo, file.hash) : `${layout.dir.replace(/\/+$/, "")}/${file.path}`;
}

/**
 * The file's hash in its manifest's algorithm, computed on the node (sha256; an aborted `signal`
 * stops it) or from its bytes (git: small files, read whole).
 */
export async function hashOnNode(node: NodeAccess, path: string, file: ManifestFile, signal?: AbortSignal): Promise<string> {
  return file.hashAlgo === "sha256" ? node.sha256(path, signal === undefined ? {} : { signal }) : gitBlobSha1(await node.readFile(path));
}
