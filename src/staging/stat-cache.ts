/**
 * The node's stat cache: (path, size, mtime, inode) → hash, kept beside the blobs. A file whose stat
 * still matches is trusted without re-hashing, so re-staging a present model hashes nothing.
 */
import type { FileStat, NodeAccess } from "../nodes/index.js";
import { machineKey, withKeyedLock } from "./keyed-lock.js";

export interface StatCacheEntry {
  size: number;
  mtimeSec: number;
  ctimeSec: number;
  ino: number;
  hash: string;
}

export type StatCache = Record<string, StatCacheEntry>;

export async function readStatCache(node: NodeAccess, path: string): Promise<StatCache> {
  try {
    const parsed: unknown = JSON.parse((await node.readFile(path)).toString("utf8"));
    return typeof parsed === "object" && parsed !== null && !Array.isArray(parsed) ? (parsed as StatCache) : {};
  } catch {
    return {};
  }
}

/**
 * Merge `entries` into the cache file: read, merge, write, under an in-process lock per (machine,
 * path), so two passes staging on one node never drop each other's entries or race on the write.
 * Best effort: the cache only saves re-hashing, so a write that fails (a full disk) is dropped and
 * the files are hashed again next time.
 */
export function updateStatCache(node: NodeAccess, path: string, entries: StatCache): Promise<void> {
  return withKeyedLock(`stat-cache ${machineKey(node)} ${path}`, async () => {
    const cache = await readStatCache(node, path);
    Object.assign(cache, entries);
    await node.writeFile(path, JSON.stringify(cache)).catch(() => undefined);
  });
}

export function cacheHit(entry: StatCacheEntry | undefined, stat: FileStat, hash: string): boolean {
  return (
    entry !== undefined &&
    entry.hash === hash &&
    entry.size === stat.size &&
    entry.mtimeSec === stat.mtimeSec &&
    entry.ctimeSec === stat.ctimeSec &&
    entry.ino === stat.ino
  );
}
