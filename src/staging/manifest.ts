/**
 * File lists with sizes and hashes, from the source: the Hub tree API (revision pinned to a commit:
 * a branch is resolved once through X-Repo-Commit) or hashing a local directory (push).
 */
import { createHash } from "node:crypto";
import { readdir, realpath, stat } from "node:fs/promises";
import { join } from "node:path";
import { quoteText, ShardctlError, showText } from "../errors/index.js";
import { closeInTurn, FileRefusedError, openRegularFile, readInTurn, sourceReadDeadlineMs, type OpenedRegularFile } from "../files/index.js";
import { readHubTree } from "./hub-tree.js";
import { assertInsideRepository, repositoryBoundaryOf, type RepositoryBoundary } from "./repository-boundary.js";
import { assertPrintableName, assertSafePath, showName } from "./safe-path.js";
import type { Manifest, ManifestFile } from "./types.js";

export interface HubManifestOptions {
  endpoint: string;
  repo: string;
  revision: string;
  token?: string;
  /** Per-request deadline, ms. Default 30000. */
  deadlineMs?: number;
}

export async function fetchHubManifest(options: HubManifestOptions): Promise<Manifest> {
  const { endpoint, repo, revision } = options;
  const headers: Record<string, string> = options.token === undefined ? {} : { Authorization: `Bearer ${options.token}` };
  const signal = AbortSignal.timeout(options.deadlineMs ?? 30_000);
  const base = endpoint.replace(/\/+$/, "");
  const encodedRepo = repo.split("/").map(encodeURIComponent).join("/");
  // Resolve the revision once; everything after uses the commit, so a moving branch cannot mix files.
  let commit = revision;
  if (!/^[0-9a-f]{40}$/.test(revision)) {
    const head = await hubFetch(
      `${base}/${encodedRepo}/resolve/${encodeURIComponent(revision)}/config.json`,
      { method: "HEAD", headers, signal, redirect: "manual" },
      repo,
    );
    const resolved = head.headers.get("x-repo-commit");
    // A git commit id (40 hex digits, or 64 for SHA-256 repositories): it names a folder on every
    // node, so anything else (a 300-character one overflowed the name limit after every download)
    // is refused before a byte is fetched. Terminal: the same Hub answers the same way on a retry.
    if (resolved === null) throw new ShardctlError("HubError", `${base}: no X-Repo-Commit for ${repo}@${revision}`);
    if (!/^(?:[0-9a-f]{40}|[0-9a-f]{64})$/.test(resolved)) {
      throw new ShardctlError(
        "HubError",
        `${base}: the X-Repo-Commit of ${repo}@${revision} is not a commit id (40 or 64 lowercase hex digits): ${quoteText(resolved.slice(0, 80))}${resolved.length > 80 ? ` (${resolved.length} characters)` : ""}; check [hub] endpoint`,
        { terminal: true },
      );
    }
    commit = resolved;
  }
  const treeUrl = `${base}/api/models/${encodedRepo}/tree/${encodeURIComponent(commit)}?recursive=true`;
  const entries = await readListing(await hubFetch(treeUrl, { headers, signal }, repo), treeUrl, repo);
  if (!Array.isArray(entries)) throw new ShardctlError("HubError", `${base}: the tree of ${repo}@${commit} is not a list`);
  const files = readHubTree(entries, base, repo, commit);
  return { repo, revision, commit, files };
}

async function hubFetch(url: string, init: RequestInit, repo: string): Promise<Response> {
  let response: Response;
  try {
    response = await fetch(url, init);
  } catch (error) {
    throw new ShardctlError("HubUnreachable", `cannot reach ${url}: ${(error as Error).message}`, { cause: error });
  }
  if (response.status === 401 || response.status === 403) {
    const sent = new Headers(init.headers).has("authorization");
    const fix = sent
      ? `the token sent was refused: check that it may read ${repo}`
      : `no token was sent: set the variable [hub] token_env names (HF_TOKEN by default) in the daemon's environment to a token that may read ${repo}`;
    throw new ShardctlError("HubUnauthorized", `${url}: ${response.status}; ${fix}`, { terminal: true });
  }
  if (response.status === 404)
    throw new ShardctlError("HubNotFound", `${url}: not found (repository ${repo} or its revision): check [model] id and revision in the definition`, {
      terminal: true,
    });
  if (!response.ok) throw new ShardctlError("HubError", `${url}: HTTP ${response.status}`);
  return response;
}

/**
 * The most bytes of a tree listing read (64 MiB). An entry is about 250 bytes, so this is some
 * 250,000 files, far past any model's; a listing beyond it (a server sending without end) is
 * refused once that much arrived, not held in memory until the deadline.
 */
export const maxListingBytes = 64 * 1024 * 1024;

/** The listing's JSON, read to at most maxListingBytes; every failure names the URL. */
async function readListing(response: Response, url: string, repo: string): Promise<unknown> {
  const chunks: Uint8Array[] = [];
  let size = 0;
  try {
    // Leaving the loop (the throw past the cap) cancels the body.
    for await (const chunk of response.body ?? []) {
      size += chunk.length;
      if (size > maxListingBytes) {
        throw new ShardctlError(
          "HubListingInvalid",
          `${url}: the listing of ${repo} is over ${maxListingBytes} bytes (64 MiB), far more than a model repository's; nothing is staged from it: check the endpoint`,
          { terminal: true },
        );
      }
      chunks.push(chunk);
    }
  } catch (error) {
    if (error instanceof ShardctlError) throw error;
    throw new ShardctlError("HubUnreachable", `cannot read ${url}: ${(error as Error).message} (after ${size} bytes)`, { cause: error });
  }
  const text = Buffer.concat(chunks, size).toString("utf8");
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    // Often a proxy's error page answered with 200: the beginning says what it is.
    const parseError = showText((error as Error).message);
    throw new ShardctlError("HubError", `${url}: the listing of ${repo} is not JSON (${parseError}); it begins ${quoteText(text.slice(0, 80))}`, { cause: error });
  }
}

/**
 * Hash every file under `dir` (sha256); the commit is a digest of the file list, so it pins content.
 * Every look at `dir` takes its turn with the directory's other reads, each within its deadline (see
 * src/files/source-reads.ts): a source on a mount that freezes mid-hash fails the pass, saying so,
 * rather than holding it and a file-system thread for as long as the freeze lasts.
 */
export async function hashLocalManifest(dir: string, repo: string, revision = "main", { readDeadlineMs = sourceReadDeadlineMs } = {}): Promise<Manifest> {
  const inTurn = <T>(file: string, read: () => Promise<T>): Promise<T> => readInTurn(dir, file, read, readDeadlineMs);
  const paths = await inTurn(".", async () => {
    const boundary = await repositoryBoundaryOf(dir);
    if (boundary !== undefined) await assertInsideRepository(boundary, dir, "", await realpath(dir));
    return listFiles(dir, boundary);
  });
  if (paths.length === 0)
    throw new ShardctlError("PushSourceEmpty", `the push source ${dir} holds no files; point it at the model's folder (config.json, *.safetensors, tokenizer)`, {
      terminal: true,
    });
  const files: ManifestFile[] = [];
  const buffer = Buffer.allocUnsafe(hashChunkBytes);
  for (const path of paths) {
    assertSafePath(path, `the push source ${dir}`);
    const hash = createHash("sha256");
    let size = 0;
    // Opened once and checked on the descriptor: an entry swapped for a FIFO after the listing is
    // refused, not read for ever. No size cap: weights are streamed through the hash, never held.
    const { handle } = await inTurn(path, () => openPushFile(dir, path));
    try {
      for (;;) {
        const { bytesRead } = await inTurn(path, () => handle.read(buffer, 0, buffer.length, null));
        if (bytesRead === 0) break;
        hash.update(buffer.subarray(0, bytesRead));
        size += bytesRead;
      }
    } finally {
      closeInTurn(dir, path, () => handle.close());
    }
    files.push({ path, size, hash: hash.digest("hex"), hashAlgo: "sha256" });
  }
  const commit = createHash("sha256")
    .update(files.map((f) => `${f.hash} ${f.size} ${f.path}\n`).join(""))
    .digest("hex")
    .slice(0, 40);
  return { repo, revision, commit, files };
}

/** How much of a push source file one read hashes, bytes (4 MiB). */
const hashChunkBytes = 4 << 20;

/** A push source file opened for hashing; a non-regular one is `PushSourceInvalid`, naming it. */
async function openPushFile(dir: string, path: string): Promise<OpenedRegularFile> {
  try {
    return await openRegularFile(join(dir, path), { what: "push source file" });
  } catch (error) {
    if (error instanceof FileRefusedError) {
      throw new ShardctlError("PushSourceInvalid", `the push source ${dir}: ${showName(path)}: ${error.detail}`, { terminal: true, cause: error });
    }
    throw error;
  }
}

/**
 * Regular files under `dir`, relative. Symlinks are followed to regular files wherever they lead
 * (within its git repository when the folder is in one: repository-boundary.ts): the folder is the
 * operator's own, and common layouts link out of it (`hf download --local-dir` links into the HF
 * cache, weights kept on another disk). A link to anything else (a folder, a
 * device, nothing) is refused rather than silently left out of the model, and so is an entry that
 * is itself a FIFO, a socket or a device (a model staged without its tokenizer would only fail on
 * the nodes), and a name with a control character (as a Hub's would be).
 */
async function listFiles(dir: string, boundary: RepositoryBoundary | undefined, prefix = ""): Promise<string[]> {
  const out: string[] = [];
  // Names read as bytes: one that is not UTF-8 would be read back as another name (its bytes
  // replaced by U+FFFD), which no file has, and fail every staging with a bare ENOENT.
  for (const entry of await readdir(join(dir, prefix), { withFileTypes: true, encoding: "buffer" })) {
    const name = utf8NameOf(entry.name, dir, prefix);
    const rel = prefix === "" ? name : `${prefix}/${name}`;
    assertPrintableName(rel, `the push source ${dir}`);
    if (entry.isDirectory()) out.push(...(await listFiles(dir, boundary, rel)));
    else if (entry.isFile()) out.push(rel);
    else if (!entry.isSymbolicLink()) {
      const kind = entry.isFIFO() ? "a FIFO (named pipe)" : entry.isSocket() ? "a socket" : "a device";
      throw new ShardctlError("PushSourceInvalid", `the push source ${dir}: ${rel} is ${kind}, not a regular file; replace it with the file itself or remove it`, {
        terminal: true,
      });
    } else {
      const target = await stat(join(dir, rel)).catch(() => undefined);
      if (target?.isFile() !== true) {
        const what = target === undefined ? "a missing file" : target.isDirectory() ? "a folder" : "not a regular file";
        throw new ShardctlError("PushSourceInvalid", `the push source ${dir}: ${rel} is a symlink to ${what}; only links to regular files are followed`, {
          terminal: true,
        });
      }
      if (boundary !== undefined) await assertInsideRepository(boundary, dir, rel, await realpath(join(dir, rel)));
      out.push(rel);
    }
  }
  return out.sort();
}

/** A directory entry's name as text; one whose bytes are not UTF-8 is `UnsafeFileName`, naming it in escapes. */
function utf8NameOf(bytes: Buffer, dir: string, prefix: string): string {
  const name = bytes.toString("utf8");
  if (Buffer.from(name, "utf8").equals(bytes)) return name;
  const shown = [...bytes].map((b) => (b >= 0x20 && b < 0x7f && b !== 0x5c ? String.fromCharCode(b) : `\\x${b.toString(16).padStart(2, "0")}`)).join("");
  throw new ShardctlError(
    "UnsafeFileName",
    `the push source ${dir} holds a file name that is not UTF-8: ${prefix === "" ? "" : `${prefix}/`}${shown}; every file of the folder is staged, and nodes and the manifest name files in UTF-8: rename it or remove it, then run shardctl reconcile <cluster>`,
    { terminal: true },
  );
}

/** The git blob id of content (what the Hub lists as `oid` for non-LFS files). */
export function gitBlobSha1(content: Buffer): string {
  return createHash("sha1").update(`blob ${content.length}\0`).update(content).digest("hex");
}

/** The manifest restricted to `wanted` ("all" keeps everything); unknown names are an error. */
export function selectFiles(manifest: Manifest, wanted: string[] | "all"): Manifest {
  if (wanted === "all") return refuseCollidingNames(manifest);
  const byPath = new Map(manifest.files.map((f) => [f.path, f]));
  const files: ManifestFile[] = [];
  for (const path of new Set(wanted)) {
    assertSafePath(path, "the stage's file list");
    const file = byPath.get(path);
    if (file === undefined) throw new ShardctlError("FileNotInSource", `${manifest.repo}@${manifest.commit} has no file ${path}`, { terminal: true });
    files.push(file);
  }
  return refuseCollidingNames({ ...manifest, files });
}

/**
 * Two paths a node is to hold that differ only in letter case or Unicode form (é composed or not)
 * name one file on macOS, whose file systems ignore both by default: the second written would
 * replace the first, and the engine would read the wrong file. Refused before anything is written.
 */
function refuseCollidingNames(manifest: Manifest): Manifest {
  const seen = new Map<string, string>();
  for (const { path } of manifest.files) {
    const key = path.normalize("NFD").toLowerCase();
    const other = seen.get(key);
    if (other !== undefined) {
      throw new ShardctlError(
        "FileNamesCollide",
        `${manifest.repo}@${manifest.commit}: ${showName(other)} and ${showName(path)} differ only in letter case or Unicode form; on a node whose file system ignores those (macOS, by default) one would overwrite the other, so nothing is staged: rename one in the source`,
        { terminal: true },
      );
    }
    seen.set(key, path);
  }
  return manifest;
}
