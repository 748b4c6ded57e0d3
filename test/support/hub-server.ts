/**
 * A local server speaking the Hugging Face Hub protocol, the one allowed stand-in (the Hub cannot be
 * reached from here). It serves model directories as repositories:
 *
 * - `GET|HEAD /{repo}/resolve/{revision}/{path}` — revision is a branch or the commit; headers
 *   `X-Repo-Commit`, `ETag`, and for LFS-like files (*.safetensors) `X-Linked-Etag` (sha256) and
 *   `X-Linked-Size`; `Accept-Ranges: bytes`; `Range: bytes=a-b | a- | -n` → 206 + `Content-Range`.
 * - `GET /api/models/{repo}/tree/{revision}[/{dir}]?recursive=true` — entries `{type, oid, size, path,
 *   lfs?: {oid, size, pointerSize}}` like the Hub's (no pagination: test repos are small).
 *
 * Fault injection (`injectFault`) cuts a file's response after N body bytes, stalls it, flips a byte in
 * it or sends a page in its place (a 200 of other content),
 * which is how tests interrupt downloads and feed corrupt data; a repository's `tree` rewrites its
 * listing (a Hub whose listing disagrees with its files). Importable from bench/ as well, so it
 * has no vitest imports.
 */
import { createHash } from "node:crypto";
import { createReadStream } from "node:fs";
import { readdir, stat } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo, Socket } from "node:net";
import { join } from "node:path";

export interface HubRepo {
  /** Repository id, e.g. "test-org/tiny-llama". */
  repo: string;
  /** The commit every branch of this repository points at (40 hex digits, any string works). */
  commit: string;
  /** Directory whose files are the repository's content. */
  dir: string;
  /** Branch names resolving to `commit`. Default ["main"]. */
  branches?: string[];
  /** Rewrites the tree listing before it is sent; the files are served as they are. Default: sent as listed. */
  tree?: (entries: HubTreeEntry[]) => unknown[];
}

/** One entry of a tree listing, as the Hub sends it. */
export interface HubTreeEntry {
  type: "file" | "directory";
  oid: string;
  size: number;
  path: string;
  lfs?: { oid: string; size: number; pointerSize: number };
}

export interface HubServerOptions {
  /** Loopback address to listen on. Default 127.0.0.1. */
  host?: string;
  /** Port. Default 0 (a free one). */
  port?: number;
  repos: HubRepo[];
  /** When set, every request must carry `Authorization: Bearer <token>` (else 401). */
  token?: string;
  /** Ignore `Range` headers: answer 200 with the whole file, as some mirrors and proxies do. Default false. */
  ignoreRange?: boolean;
  /** Send file bodies chunked, without Content-Length, as a proxy compressing on the fly does. Default false. */
  chunked?: boolean;
}

export interface HubFault {
  /** Repository-relative file path the fault applies to. */
  path: string;
  /** Destroy the connection after this many body bytes of the response. */
  cutAfterBytes?: number;
  /** Flip the byte at this offset of the file (absolute file offset) in the response. */
  corruptAtOffset?: number;
  /** Send this page instead of the file, as a 200 with its own Content-Length (a proxy's or a rate limit's page). */
  page?: string;
  /** Answer this status instead of the file, with `Retry-After: 30` (a rate limit: 429, or 503). */
  status?: number;
  /** Send this many body bytes, then nothing more while keeping the connection open (a stalled server). */
  stallAfterBytes?: number;
  /** How many GET responses the fault applies to before it is used up. Default 1. */
  times?: number;
  /** Only responses of at least this many bytes (a download, not the range read of a file's header). Default 0: every one. */
  minBytes?: number;
}

export interface HubStats {
  requests: number;
  /** Response body bytes written (a cut response counts what was sent before the cut). */
  bytesServed: number;
  /** Request count per URL path (without the query). */
  requestsByPath: Record<string, number>;
  /** Body bytes per URL path. */
  bytesByPath: Record<string, number>;
  /** Requests that carried an Authorization header (to check where tokens go). */
  requestsWithAuthorization: number;
}

export interface HubServer {
  /** `http://host:port`, what HF_ENDPOINT would be set to. */
  endpoint: string;
  stats(): HubStats;
  resetStats(): void;
  injectFault(fault: HubFault): void;
  clearFaults(): void;
  /** Send file bodies at most this fast (bytes per second) from now on, or as fast as they go (undefined, the default). */
  pace(bytesPerSecond: number | undefined): void;
  /** Replace or add a repository (e.g. move a branch to a new commit). Earlier commits stay downloadable by id, as on the Hub. */
  setRepo(repo: HubRepo): void;
  /** sha256 (hex) of a repository file, as the server advertises it. */
  sha256Of(repo: string, path: string): Promise<string>;
  close(): Promise<void>;
}

interface FileInfo {
  path: string;
  size: number;
  sha256: string;
  gitOid: string;
}

const lfsPattern = /\.safetensors$/;

export async function startHubServer(options: HubServerOptions): Promise<HubServer> {
  const host = options.host ?? "127.0.0.1";
  const repos = new Map<string, HubRepo>();
  for (const r of options.repos) repos.set(r.repo, r);
  // Commits a branch has moved away from: still served by commit id, like the Hub's history.
  const history = new Map<string, HubRepo>();
  const hashCache = new Map<string, { key: string; info: FileInfo }>();
  let faults: Array<Required<Pick<HubFault, "times">> & HubFault> = [];
  let stats = emptyStats();
  let bytesPerSecond: number | undefined;
  const sockets = new Set<Socket>();

  // Hash lazily and remember by (size, mtime): repositories can be gigabytes (bench).
  async function describeFile(repo: HubRepo, path: string): Promise<FileInfo | undefined> {
    const full = join(repo.dir, path);
    const st = await stat(full).catch(() => undefined);
    if (st === undefined || !st.isFile()) return undefined;
    const key = `${st.size}:${st.mtimeMs}:${st.ino}`;
    const cached = hashCache.get(full);
    if (cached !== undefined && cached.key === key) return cached.info;
    const sha = createHash("sha256");
    const git = createHash("sha1");
    git.update(`blob ${st.size}\0`);
    for await (const chunk of createReadStream(full, { highWaterMark: 1 << 20 })) {
      sha.update(chunk as Buffer);
      git.update(chunk as Buffer);
    }
    const info = { path, size: st.size, sha256: sha.digest("hex"), gitOid: git.digest("hex") };
    hashCache.set(full, { key, info });
    return info;
  }

  async function listFiles(dir: string, prefix = ""): Promise<Array<{ path: string; isDir: boolean }>> {
    const out: Array<{ path: string; isDir: boolean }> = [];
    const entries = await readdir(join(dir, prefix), { withFileTypes: true });
    entries.sort((a, b) => a.name.localeCompare(b.name));
    for (const e of entries) {
      const rel = prefix === "" ? e.name : `${prefix}/${e.name}`;
      if (e.isDirectory()) {
        out.push({ path: rel, isDir: true });
        out.push(...(await listFiles(dir, rel)));
      } else if (e.isFile()) out.push({ path: rel, isDir: false });
    }
    return out;
  }

  /** The repository state a revision names (the current one, or an earlier commit) and its commit. */
  function resolveRevision(repo: HubRepo, revision: string): { at: HubRepo; commit: string } | undefined {
    if (revision === repo.commit || (repo.branches ?? ["main"]).includes(revision)) return { at: repo, commit: repo.commit };
    const earlier = history.get(`${repo.repo}@${revision}`);
    return earlier === undefined ? undefined : { at: earlier, commit: earlier.commit };
  }

  // Split "<repo>/<rest>" at the longest known repository id.
  function findRepo(path: string, marker: string): { repo: HubRepo; rest: string } | undefined {
    for (const repo of repos.values()) {
      const prefix = `${repo.repo}/${marker}/`;
      if (path.startsWith(prefix)) return { repo, rest: path.slice(prefix.length) };
    }
    return undefined;
  }

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    // The raw path, not URL's normalised one: a ".." must be seen (and refused), not resolved away.
    const rawUrl = req.url ?? "/";
    const query = rawUrl.indexOf("?");
    const rawPath = query < 0 ? rawUrl : rawUrl.slice(0, query);
    const url = new URL(rawUrl, "http://hub.invalid");
    stats.requests++;
    stats.requestsByPath[rawPath] = (stats.requestsByPath[rawPath] ?? 0) + 1;
    if (req.headers.authorization !== undefined) stats.requestsWithAuthorization++;
    if (options.token !== undefined && req.headers.authorization !== `Bearer ${options.token}`) {
      return sendJson(res, 401, { error: "Invalid credentials in Authorization header" });
    }
    if (req.method !== "GET" && req.method !== "HEAD") return sendJson(res, 405, { error: "method not allowed" });
    let segments: string[];
    try {
      segments = rawPath
        .split("/")
        .slice(1)
        .map((s) => decodeURIComponent(s));
    } catch {
      return sendJson(res, 400, { error: "bad path encoding" });
    }
    if (segments.some((s) => s === ".." || s === "." || s.includes("\0") || s.includes("\\") || s.includes("/"))) {
      return sendJson(res, 400, { error: "path traversal refused" });
    }
    const path = segments.join("/");
    if (path.startsWith("api/models/")) {
      const found = findRepo(path.slice("api/models/".length), "tree");
      if (found === undefined) return sendJson(res, 404, { error: "Repository not found" });
      const [revision = "", ...sub] = found.rest.split("/");
      const resolved = resolveRevision(found.repo, revision);
      if (resolved === undefined) return sendJson(res, 404, { error: `Invalid rev id: ${revision}` });
      const { at, commit } = resolved;
      const recursive = url.searchParams.get("recursive") === "true";
      const under = sub.filter((s) => s !== "").join("/");
      const all = await listFiles(at.dir);
      const entries: HubTreeEntry[] = [];
      for (const f of all) {
        const parent = f.path.includes("/") ? f.path.slice(0, f.path.lastIndexOf("/")) : "";
        const inScope = recursive ? under === "" || f.path.startsWith(`${under}/`) : parent === under;
        if (!inScope) continue;
        if (f.isDir) {
          entries.push({ type: "directory", oid: createHash("sha1").update(f.path).digest("hex"), size: 0, path: f.path });
          continue;
        }
        const info = await describeFile(at, f.path);
        if (info === undefined) continue;
        entries.push({
          type: "file",
          oid: info.gitOid,
          size: info.size,
          path: info.path,
          ...(lfsPattern.test(info.path) ? { lfs: { oid: info.sha256, size: info.size, pointerSize: 134 } } : {}),
        });
      }
      return sendJson(res, 200, at.tree === undefined ? entries : at.tree(entries), { "X-Repo-Commit": commit });
    }
    const found = findRepo(path, "resolve");
    if (found === undefined) return sendJson(res, 404, { error: "Repository not found" }, { "X-Error-Code": "RepoNotFound" });
    const slash = found.rest.indexOf("/");
    const revision = slash < 0 ? found.rest : found.rest.slice(0, slash);
    const filePath = slash < 0 ? "" : found.rest.slice(slash + 1);
    const resolved = resolveRevision(found.repo, revision);
    if (resolved === undefined) return sendJson(res, 404, { error: "Revision not found" }, { "X-Error-Code": "RevisionNotFound" });
    const commit = resolved.commit;
    const info = filePath === "" ? undefined : await describeFile(resolved.at, filePath);
    if (info === undefined) return sendJson(res, 404, { error: "Entry not found" }, { "X-Error-Code": "EntryNotFound", "X-Repo-Commit": commit });

    const lfs = lfsPattern.test(info.path);
    const headers: Record<string, string | number> = {
      "X-Repo-Commit": commit,
      ETag: `"${lfs ? info.sha256 : info.gitOid}"`,
      "Accept-Ranges": options.ignoreRange === true ? "none" : "bytes",
      "Content-Type": "application/octet-stream",
      ...(lfs ? { "X-Linked-Etag": `"${info.sha256}"`, "X-Linked-Size": info.size } : {}),
    };
    let start = 0;
    let end = info.size - 1;
    let status = 200;
    const range = options.ignoreRange === true ? undefined : req.headers.range;
    if (range !== undefined) {
      const parsed = parseRange(range, info.size);
      if (parsed === undefined) {
        res.writeHead(416, { ...headers, "Content-Range": `bytes */${info.size}`, "Content-Length": 0 });
        res.end();
        return;
      }
      [start, end] = parsed;
      status = 206;
      headers["Content-Range"] = `bytes ${start}-${end}/${info.size}`;
    }
    const length = Math.max(0, end - start + 1);
    const fault = req.method === "GET" ? takeFault(info.path, length) : undefined;
    if (fault?.page !== undefined) {
      res.writeHead(200, { "Content-Type": "text/html", "Content-Length": Buffer.byteLength(fault.page) });
      res.end(fault.page);
      return;
    }
    if (fault?.status !== undefined) {
      const body = JSON.stringify({ error: "rate limited" });
      res.writeHead(fault.status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(body), "Retry-After": "30" });
      res.end(body);
      return;
    }
    res.writeHead(status, options.chunked === true && req.method === "GET" ? headers : { ...headers, "Content-Length": length });
    if (req.method === "HEAD" || length === 0) {
      res.end();
      return;
    }
    await streamBody(res, join(resolved.at.dir, info.path), start, end, fault, rawPath);
  }

  function takeFault(path: string, length: number): HubFault | undefined {
    const i = faults.findIndex((f) => f.path === path && f.times > 0 && length >= (f.minBytes ?? 0));
    if (i < 0) return undefined;
    const f = faults[i]!;
    f.times--;
    return f;
  }

  async function streamBody(res: ServerResponse, file: string, start: number, end: number, fault: HubFault | undefined, key: string): Promise<void> {
    let sent = 0;
    // Paced bodies go out in 16 KiB pieces, each when the rate allows it.
    const rate = bytesPerSecond;
    const startedAt = performance.now();
    const stream = createReadStream(file, { start, end, highWaterMark: rate === undefined ? 1 << 20 : 16 << 10 });
    try {
      for await (const raw of stream) {
        let chunk = raw as Buffer;
        const offset = start + sent;
        if (fault?.corruptAtOffset !== undefined && fault.corruptAtOffset >= offset && fault.corruptAtOffset < offset + chunk.length) {
          chunk = Buffer.from(chunk);
          chunk[fault.corruptAtOffset - offset] = (chunk[fault.corruptAtOffset - offset] ?? 0) ^ 0xff;
        }
        if (fault?.cutAfterBytes !== undefined && sent + chunk.length >= fault.cutAfterBytes) {
          const part = chunk.subarray(0, fault.cutAfterBytes - sent);
          count(key, part.length);
          // Flush what was promised, then kill the socket so the client sees a truncated body.
          res.write(part, () => res.destroy());
          stream.destroy();
          return;
        }
        if (fault?.stallAfterBytes !== undefined && sent + chunk.length >= fault.stallAfterBytes) {
          const part = chunk.subarray(0, fault.stallAfterBytes - sent);
          count(key, part.length);
          res.write(part);
          stream.destroy();
          // Silent from here on, the connection open until the client gives up (or the server closes).
          await new Promise<void>((resolve) => res.once("close", resolve));
          return;
        }
        if (rate !== undefined) {
          const due = startedAt + (sent / rate) * 1000 - performance.now();
          if (due > 0) await new Promise((resolve) => setTimeout(resolve, due));
          if (res.destroyed) return;
        }
        count(key, chunk.length);
        sent += chunk.length;
        if (!res.write(chunk)) {
          await new Promise<void>((resolve) => {
            const done = (): void => {
              res.off("drain", done);
              res.off("close", done);
              resolve();
            };
            res.on("drain", done);
            res.on("close", done);
          });
          if (res.destroyed) return;
        }
      }
      res.end();
    } catch {
      res.destroy();
    } finally {
      stream.destroy();
    }
  }

  function count(key: string, bytes: number): void {
    stats.bytesServed += bytes;
    stats.bytesByPath[key] = (stats.bytesByPath[key] ?? 0) + bytes;
  }

  const server = createServer((req, res) => {
    handle(req, res).catch((error: unknown) => {
      if (!res.headersSent) sendJson(res, 500, { error: String(error) });
      else res.destroy();
    });
  });
  server.on("connection", (socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
  });
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(options.port ?? 0, host, () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const endpoint = `http://${host}:${port}`;

  return {
    endpoint,
    stats: () => structuredClone(stats),
    resetStats: () => {
      stats = emptyStats();
    },
    injectFault: (fault) => {
      faults.push({ ...fault, times: fault.times ?? 1 });
    },
    clearFaults: () => {
      faults = [];
    },
    pace: (rate) => {
      bytesPerSecond = rate;
    },
    setRepo: (repo) => {
      const previous = repos.get(repo.repo);
      if (previous !== undefined && previous.commit !== repo.commit) history.set(`${previous.repo}@${previous.commit}`, previous);
      repos.set(repo.repo, repo);
    },
    sha256Of: async (repoId, path) => {
      const repo = repos.get(repoId);
      const info = repo === undefined ? undefined : await describeFile(repo, path);
      if (info === undefined) throw new Error(`no file ${path} in ${repoId}`);
      return info.sha256;
    },
    close: () =>
      new Promise<void>((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(() => resolve());
      }),
  };
}

function emptyStats(): HubStats {
  return { requests: 0, bytesServed: 0, requestsByPath: {}, bytesByPath: {}, requestsWithAuthorization: 0 };
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "Content-Type": "application/json", "Content-Length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** Parse one `bytes=` range against `size`; undefined when unsatisfiable or malformed. */
function parseRange(header: string, size: number): [number, number] | undefined {
  const m = /^bytes=(\d*)-(\d*)$/.exec(header.trim());
  if (m === null) return undefined;
  const [, a = "", b = ""] = m;
  if (a === "" && b === "") return undefined;
  if (a === "") {
    const n = Number(b);
    if (n === 0) return undefined;
    return [Math.max(0, size - n), size - 1];
  }
  const start = Number(a);
  const end = b === "" ? size - 1 : Math.min(Number(b), size - 1);
  if (start >= size || end < start) return undefined;
  return [start, end];
}
