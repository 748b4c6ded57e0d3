/**
 * Bring one node to "present" for a manifest: classify, refuse early when the disk is short, move
 * what is missing into blobs/<hash>.incomplete (resuming), verify the hash, rename into place, link
 * snapshots/<commit>/<path>, record refs/<branch>. A snapshot already in use by a running cluster is
 * never modified: blobs are content-addressed and another revision links its own snapshot folder.
 */
import { posix } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import { probeNode, type NodeAccess } from "../nodes/index.js";
import { isShardctlError, messageOf, ShardctlError } from "../errors/index.js";
import { withNodeLock } from "./node-lock.js";
import { blobPath, incompletePath, linkTarget, refPath, snapshotDir, snapshotPath, statCachePath } from "./cache-layout.js";
import { classifyNode, hashOnNode, type Layout } from "./classify.js";
import { selectFiles } from "./manifest.js";
import { createProgress } from "./progress.js";
import { isKeyedLockHeld, machineKey, withKeyedLock } from "./keyed-lock.js";
import { updateStatCache, type StatCacheEntry } from "./stat-cache.js";
import { forgetWriter, removePartial, transferFile } from "./transfer.js";
import type { FileCheck, Manifest, NodeStagingResult, StagingOptions, StagingSource } from "./types.js";

/** How long a download may receive nothing before it is cut and resumed, ms: a minute of silence is a stall on any link, not a slow one. */
export const defaultTransferIdleMs = 60_000;

export async function stageNode(node: NodeAccess, source: StagingSource, fullManifest: Manifest, options: StagingOptions = {}): Promise<NodeStagingResult> {
  const name = node.config.name;
  const manifest = selectFiles(fullManifest, options.files ?? "all");
  const modelDir = await resolveHome(node, node.config.modelDir);

  // Classify.
  if (source.kind === "path") {
    const dir = await resolveHome(node, source.path);
    const result = await orCancelled(classifyNode(node, manifest, { kind: "plain", dir }, { verify: options.verify, signal: options.signal }), name, options.signal);
    if (result.state !== "present") {
      const bad = result.files.filter((f) => f.state !== "present").map((f) => `${f.file.path} (${f.state})`);
      throw new ShardctlError("ModelNotPresent", `node ${name}: source "path" ${dir} is not a verified copy: ${bad.join(", ")}; staging never writes there`, {
        terminal: true,
      });
    }
    options.onProgress?.({ node: name, phase: "done", bytesDone: 0, bytesTotal: 0, rateBytesPerSec: 0, etaSec: 0 });
    return { node: name, before: "present", bytesTransferred: 0, filesTransferred: 0, hashedFiles: result.hashedFiles, modelPath: dir };
  }
  const layout: Layout = { kind: "cache", modelDir };
  const classify = () => orCancelled(classifyNode(node, manifest, layout, { verify: options.verify, signal: options.signal }), name, options.signal);
  // Hashing every file is as heavy as a transfer: it waits for its turn as one does. Not before the
  // disk is known to hold at least what is missing outright: a node that stays full is retried,
  // and would otherwise be read end to end at every try.
  if (options.verify === "full") await refuseIfShort(node, modelDir, await missingBytes(node, manifest, modelDir), []);
  const classification = options.verify === "full" ? await withTurn(name, options, classify) : await classify();
  const todo = classification.files.filter((f) => f.state !== "present");
  const needed = todo.reduce((sum, f) => sum + f.file.size - (f.state === "partial" ? Math.min(f.haveBytes, f.file.size) : 0), 0);
  const result: NodeStagingResult = {
    node: name,
    before: classification.state,
    bytesTransferred: 0,
    filesTransferred: 0,
    hashedFiles: classification.hashedFiles,
    modelPath: snapshotDir(modelDir, manifest.repo, manifest.commit),
  };

  // Refuse before transferring anything when the disk is short. Listed sizes are what a transfer may
  // write: a download whose body passes its file's listed size is stopped there (transfer.ts). A
  // copy that does not match its size or checksum is room its replacement takes back: it is
  // removed, under the file's locks, just before the replacement is fetched.
  if (needed > 0)
    await refuseIfShort(
      node,
      modelDir,
      needed,
      todo.filter((f) => f.state === "mismatched"),
    );

  // Transfer, verify, rename into place: each file in its turn (see takeTurn).
  const progress = createProgress(name, needed, options.onProgress);
  progress.update("classify", 0, undefined, true);
  const blobsDir = posix.dirname(blobPath(modelDir, manifest.repo, "x"));
  await node.mkdir(blobsDir);
  const hashed = new Map<string, StatCacheEntry>();
  for (const check of todo) {
    // One transfer per blob per machine at a time (blobs/<hash>.incomplete is a fixed name): one
    // pass of this process at a time, then one process of all that stage there (the node's lock).
    // Under both the file is re-checked (two stats): another may have verified it since classify.
    const key = `blob ${machineKey(node)} ${modelDir} ${manifest.repo} ${check.file.hash}`;
    // Another staging of this process (another cluster, or another node of the same machine and
    // folder) stages the same file there: said, as a wait for another process's lock is.
    if (isKeyedLockHeld(key)) progress.update("waiting", 0, check.file.path, true);
    let began = false;
    const locked = withKeyedLock(key, async () => {
      began = true;
      // Stopped while waiting for the lock (another pass's download of the same blob).
      stopIfCancelled(name, options.signal);
      // Fetched meanwhile by the pass that held the lock: no place needed (a stat or two; a
      // mismatched copy is judged again under the node's lock, where it is hashed).
      if (check.state !== "mismatched" && (await orCancelled(recheck(node, manifest, modelDir, check, options.signal), name, options.signal)).state === "present")
        return false;
      // The node's place is taken before its lock of the file: another process waiting for that lock
      // then waits for a transfer under way, never for this daemon's queue.
      return withTurn(name, options, () =>
        withNodeLock(
          node,
          blobPath(modelDir, manifest.repo, check.file.hash),
          async () => {
            const current = await orCancelled(recheck(node, manifest, modelDir, check, options.signal), name, options.signal);
            if (current.state === "present") return false;
            // A copy that does not match serves no revision (blobs are named by their content): it
            // goes first, so that on a tight disk it does not take the room of its replacement (a
            // partial replacement beside it included). A process that has it open keeps what it read
            // (the file lives on until closed).
            if (check.state === "mismatched") await node.remove(blobPath(modelDir, manifest.repo, check.file.hash));
            await fetchOne(node, source, manifest, modelDir, current, options, progress, hashed);
            return true;
          },
          {
            ...(options.signal === undefined ? {} : { signal: options.signal }),
            onWait: (holder) => progress.update("waiting", 0, check.file.path, true, holder),
          },
        ),
      );
    });
    const fetched = await untilCancelled(locked, () => !began, name, options.signal, check.file.path);
    if (!fetched) continue;
    result.filesTransferred++;
    result.hashedFiles++;
  }
  result.bytesTransferred = progress.bytesDone;

  // Link snapshots/<commit>/<path> and record the ref, one pass per repository folder at a time
  // (a local re-link is remove-then-create, which two passes at once would trip over).
  await withKeyedLock(`links ${machineKey(node)} ${modelDir} ${manifest.repo}`, () => linkSnapshot(node, manifest, modelDir, classification.files));
  if (hashed.size > 0) await updateStatCache(node, statCachePath(modelDir, manifest.repo), Object.fromEntries(hashed));
  progress.update("done", 0, undefined, true);
  return result;
}

/**
 * Refuse (InsufficientDisk, retried with back-off: space freed there is found without a kick, and
 * the check comes before any byte moves, so a retry never fills the disk) when the free space at
 * `modelDir` is less than `needed` bytes, counting the room the `mismatched` copies give back.
 */
async function refuseIfShort(node: NodeAccess, modelDir: string, needed: number, mismatched: readonly FileCheck[]): Promise<void> {
  if (needed <= 0) return;
  const name = node.config.name;
  const probe = await probeNode(node);
  // An unknown figure is a refusal, not a pass: filling a node's disk breaks more than staging.
  if (probe.diskFreeBytes === undefined) {
    const why = probe.error ?? (probe.reachable ? "the probe printed no free-space figure (is df missing or its output unusual?)" : "the node did not answer");
    throw new ShardctlError("DiskSpaceUnknown", `node ${name}: cannot tell the free space at ${modelDir} before transferring ${needed} bytes: ${why}`);
  }
  const reclaimed = mismatched.reduce((sum, f) => sum + (f.mismatchedBytes ?? 0), 0);
  if (probe.diskFreeBytes + reclaimed >= needed) return;
  const replaced =
    mismatched.length === 0
      ? ""
      : `, ${mismatched.map((f) => f.file.path).join(", ")} to replace a copy that does not match its checksum (removed first: ${reclaimed} bytes counted as free)`;
  throw new ShardctlError(
    "InsufficientDisk",
    `node ${name} needs ${needed} bytes more at ${modelDir} (what of the model is not there yet${replaced}) but only ${probe.diskFreeBytes + reclaimed} bytes are free: ` +
      `free ${needed - probe.diskFreeBytes - reclaimed} bytes there, or give the node a model_dir on a larger disk; tried again with back-off, at most a minute apart (what was staged is kept)`,
  );
}

/**
 * What is missing outright, by a look at sizes alone (no hashing): the listed size of each file
 * with no blob of that size, less what a partial file holds. What a full verification may add to it
 * (a copy of the right size that does not hash) comes on top: a disk short of this is short.
 */
async function missingBytes(node: NodeAccess, manifest: Manifest, modelDir: string): Promise<number> {
  const [blobs, partials] = await Promise.all([
    node.statMany(manifest.files.map((f) => blobPath(modelDir, manifest.repo, f.hash))),
    node.statMany(manifest.files.map((f) => incompletePath(modelDir, manifest.repo, f.hash))),
  ]);
  return manifest.files.reduce((sum, file, i) => {
    if (blobs[i]?.type === "file" && blobs[i].size === file.size) return sum;
    return sum + file.size - Math.min(partials[i]?.size ?? 0, file.size);
  }, 0);
}

/**
 * How long to wait before a file's next attempt, ms: 200 ms more each time, as a cut connection
 * needs no more; a server that said it is busy or rate limiting (HTTP 429 or 503) gets 10 s more
 * each time (the Hub's rate limits last minutes: asking again at once only prolongs them).
 */
function retryDelayMs(error: unknown, attempt: number): number {
  const busy = /\b(?:HTTP|error:) (?:429|503)\b/.test(messageOf(error));
  return (busy ? 10_000 : 200) * attempt;
}

/** Run `work` in a turn the caller gives (see takeTurn), given back when it ends. */
async function withTurn<T>(node: string, options: StagingOptions, work: () => Promise<T>): Promise<T> {
  if (options.takeTurn === undefined) return work();
  const release = await options.takeTurn(node);
  try {
    stopIfCancelled(node, options.signal);
    return await work();
  } finally {
    release();
  }
}

async function linkSnapshot(node: NodeAccess, manifest: Manifest, modelDir: string, checks: FileCheck[]): Promise<void> {
  for (const check of checks) {
    if (!check.linkMissing && check.state === "present") continue;
    const link = snapshotPath(modelDir, manifest.repo, manifest.commit, check.file.path);
    await node.mkdir(posix.dirname(link));
    await node.symlink(linkTarget(check.file.path, check.file.hash), link);
  }
  if (manifest.revision !== manifest.commit) {
    const ref = refPath(modelDir, manifest.repo, manifest.revision);
    const current = await node.readFile(ref).catch(() => undefined);
    if (current?.toString() !== manifest.commit) {
      await node.mkdir(posix.dirname(ref));
      await node.writeFile(ref, manifest.commit);
    }
  }
}

/**
 * A file's state after waiting for another pass that held its blob: present when that pass left a
 * verified blob (its verification is trusted: same process, just now), else whatever partial is there.
 */
async function recheck(node: NodeAccess, manifest: Manifest, modelDir: string, check: FileCheck, signal: AbortSignal | undefined): Promise<FileCheck> {
  const { file } = check;
  const blob = await node.stat(blobPath(modelDir, manifest.repo, file.hash));
  if (blob?.type === "file" && blob.size === file.size && check.state !== "mismatched") return { ...check, state: "present", haveBytes: file.size };
  if (blob?.type === "file" && blob.size === file.size && (await hashOnNode(node, blobPath(modelDir, manifest.repo, file.hash), file, signal)) === file.hash) {
    return { ...check, state: "present", haveBytes: file.size };
  }
  const partial = await node.stat(incompletePath(modelDir, manifest.repo, file.hash));
  return partial === undefined
    ? { ...check, state: check.state === "mismatched" ? "mismatched" : "missing", haveBytes: 0 }
    : { ...check, state: "partial", haveBytes: partial.size };
}

async function fetchOne(
  node: NodeAccess,
  source: Extract<StagingSource, { kind: "hub" | "push" }>,
  manifest: Manifest,
  modelDir: string,
  check: FileCheck,
  options: StagingOptions,
  progress: ReturnType<typeof createProgress>,
  hashed: Map<string, StatCacheEntry>,
): Promise<void> {
  const { file } = check;
  const target = incompletePath(modelDir, manifest.repo, file.hash);
  const blob = blobPath(modelDir, manifest.repo, file.hash);
  let have = check.state === "partial" ? check.haveBytes : 0;
  // A mismatched blob is re-fetched beside it; a stray partial larger than the file starts over.
  if (check.state !== "partial" || have > file.size) {
    await node.remove(target);
    have = 0;
  }
  // Whether the file is spliced onto bytes of an earlier attempt (decides how final a bad hash is).
  let resumed = have > 0;
  const attempts = options.attempts ?? 3;
  // The file's high-water mark: bytes a retry fetches again (after a partial write was lost) are not counted twice.
  let counted = have;
  for (let attempt = 1; have < file.size || file.size === 0; attempt++) {
    try {
      await transferFile({
        node,
        source,
        commit: manifest.commit,
        file,
        target,
        haveBytes: have,
        deadlineMs: options.transferDeadlineMs ?? 3_600_000,
        idleMs: options.transferIdleMs ?? defaultTransferIdleMs,
        onBytes: (bytes) => {
          if (bytes > counted) progress.update("transfer", bytes - counted, file.path);
          counted = Math.max(counted, bytes);
        },
        ...(options.signal === undefined ? {} : { signal: options.signal }),
      });
    } catch (error) {
      // Cut because the caller stopped the staging: no stat, no further attempt.
      stopIfCancelled(node.config.name, options.signal, file.path);
      // A terminal failure (a body past the listed size) repeats on every attempt.
      if (isShardctlError(error) && error.terminal) throw error;
      // A node that stopped answering (a partition) is not asked again here: each question would wait
      // out a handshake deadline while the status still says "staging". The pass fails naming the
      // node, and a later one resumes from whatever reached it.
      if (isShardctlError(error, "NodeUnreachable")) throw error;
      // Resume from whatever reached the node; give up after `attempts`. A node that cannot say what
      // reached it fails the pass, its partial file kept: starting over would throw those bytes away.
      const st = await node.stat(target).catch(() => {
        // The transfer's own failure is the one to report (curl's words, the SFTP error).
        throw error;
      });
      if (st !== undefined && st.size > counted) progress.update("transfer", st.size - counted, file.path);
      counted = Math.max(counted, st?.size ?? 0);
      have = st?.size ?? 0;
      resumed ||= have > 0;
      if (attempt >= attempts) throw error;
      // Cut short when the staging is called off (the wait may be 20 s for a rate-limiting Hub).
      await delay(retryDelayMs(error, attempt), undefined, options.signal === undefined ? {} : { signal: options.signal }).catch(() => undefined);
      stopIfCancelled(node.config.name, options.signal, file.path);
      continue;
    }
    break;
  }

  // Verify before the blob becomes visible.
  progress.update("verify", 0, file.path, true);
  const st = await node.stat(target);
  const hash = st?.size === file.size ? await orCancelled(hashOnNode(node, target, file, options.signal), node.config.name, options.signal, file.path) : undefined;
  if (hash !== file.hash) {
    await removePartial({ node, source, target });
    // A Hub commit's files never change: a whole file fetched in one go that does not match is what
    // the source serves, and fetching it again brings the same bytes. A file spliced onto a partial of
    // an earlier attempt starts clean next time, and a push folder is hashed afresh every pass.
    throw new ShardctlError(
      "ChecksumMismatch",
      `node ${node.config.name}: ${file.path} arrived as ${st?.size ?? 0} bytes with ${file.hashAlgo} ${hash ?? "(not hashed)"}, expected ${file.size} bytes ${file.hash}; the partial file was removed`,
      { terminal: source.kind === "hub" && !resumed },
    );
  }
  await node.rename(target, blob);
  await forgetWriter({ node, source, target });
  const final = await node.stat(blob);
  if (final !== undefined) hashed.set(blob, { size: final.size, mtimeSec: final.mtimeSec, ctimeSec: final.ctimeSec, ino: final.ino, hash: file.hash });
}

/** StagingCancelled once `signal` is aborted, naming the node (and the file cut, if one was). */
function stopIfCancelled(node: string, signal: AbortSignal | undefined, file?: string): void {
  if (signal?.aborted !== true) return;
  const why = signal.reason instanceof Error ? signal.reason.message : "its caller stopped it";
  throw new ShardctlError("StagingCancelled", `node ${node}: staging stopped${file === undefined ? "" : ` during ${file} (its partial file is kept)`}: ${why}`);
}

/** `work`, failing as StagingCancelled when it failed because `signal` aborted (a hash or a transfer cut). */
async function orCancelled<T>(work: Promise<T>, node: string, signal: AbortSignal | undefined, file?: string): Promise<T> {
  try {
    return await work;
  } catch (error) {
    stopIfCancelled(node, signal, file);
    throw error;
  }
}

/**
 * `work` on `file`, or StagingCancelled as soon as `signal` aborts while it is still `waiting` (for
 * the blob's lock): once it has begun, the work answers the abort itself (a transfer or a hash cut),
 * and the staging waits for it — nothing of it may go on after the staging has answered.
 */
function untilCancelled<T>(work: Promise<T>, waiting: () => boolean, node: string, signal: AbortSignal | undefined, file: string): Promise<T> {
  if (signal === undefined) return work;
  work.catch(() => undefined);
  let onAbort: (() => void) | undefined;
  const cancelled = new Promise<never>((_, reject) => {
    onAbort = () => {
      if (!waiting()) return;
      try {
        stopIfCancelled(node, signal, file);
      } catch (error) {
        reject(error as Error);
      }
    };
    signal.addEventListener("abort", onAbort, { once: true });
    if (signal.aborted) onAbort();
  });
  return Promise.race([work, cancelled]).finally(() => signal.removeEventListener("abort", onAbort!));
}

/** Expand a leading "~/" with the node's own $HOME (remote model dirs may be written that way). */
export async function resolveHome(node: NodeAccess, path: string): Promise<string> {
  if (path !== "~" && !path.startsWith("~/")) return path;
  const result = await node.run(["sh", "-c", 'printf %s "$HOME"']);
  const home = result.stdout;
  if (result.exitCode !== 0 || home === "") throw new ShardctlError("NodeCommandFailed", `node ${node.config.name}: cannot read $HOME to expand ${path}`);
  return posix.join(home, path.slice(1));
}
