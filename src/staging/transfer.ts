/**
 * Moving one file's bytes into `<blob>.incomplete` on a node, resuming whatever is already there.
 *
 * - hub, local node: fetched in-process with `Range: bytes=<have>-`, appended to the partial file
 *   (raw-http.ts for plain http, node:http for https, redirects and anything unusual).
 * - hub, SSH node: the node fetches it itself with curl (`--continue-at` resumes from the partial
 *   file's size), its body piped through `head -c` into the file, one writer per file
 *   (capped-curl.ts). curl is on every Linux and macOS machine, needs no runtime of ours on the
 *   node, and keeps the model bytes off the control node's link. The token travels on curl's stdin
 *   (`-K -`), never in argv. Progress is the partial file's size, polled over the pooled connection.
 * - push: SFTP from the control node, appending from the remote partial size.
 *
 * A hub download never leaves more than the file's listed size plus one byte in the file: each path
 * stops when the body would pass that size (up front when Content-Length says so), the partial file
 * is removed, and the failure is DownloadTooLarge (terminal: a commit's file keeps its size). The
 * free-disk check before the transfer relies on this: it counts listed sizes.
 *
 * A reply with a success status that cannot be the rest of the file (a whole body of another size, a
 * range from elsewhere or ending short: a proxy's or a rate limit's page) is DownloadFailed, not
 * terminal, and writes nothing where the reply's headers say so up front; curl's short body on a
 * node is removed. A download that receives nothing for `idleMs` is cut (DownloadFailed) and the
 * next attempt resumes: a server that keeps the connection open but stops sending costs a minute,
 * not the hour of the whole-file deadline.
 *
 * A transfer given an aborted signal is cut at once (the download's socket; curl on the node, with
 * its process group; a push, over SSH by ending its own SFTP session), keeping what reached the
 * partial file for a later resume.
 */
import { createWriteStream } from "node:fs";
import { stat } from "node:fs/promises";
import { join } from "node:path";
import { get as httpGet, type IncomingMessage } from "node:http";
import { get as httpsGet } from "node:https";
import type { NodeAccess } from "../nodes/index.js";
import { cappedCurlScript, writerRecordOf } from "./capped-curl.js";
import { rawDownload, replyMismatch } from "./raw-http.js";
import { isShardctlError, ShardctlError } from "../errors/index.js";
import { closeInTurn, readChunkInTurn, readInTurn } from "../files/index.js";
import type { ManifestFile, StagingSource } from "./types.js";

export interface TransferRequest {
  node: NodeAccess;
  source: Extract<StagingSource, { kind: "hub" | "push" }>;
  commit: string;
  file: ManifestFile;
  /** The partial file on the node. */
  target: string;
  /** Bytes already in `target`. */
  haveBytes: number;
  deadlineMs: number;
  /** The longest wait for a byte of a download, ms. */
  idleMs: number;
  /** Called with the bytes now in `target`. */
  onBytes: (bytes: number) => void;
  /** Cuts the transfer when aborted; the partial file stays for a later staging to resume. */
  signal?: AbortSignal;
}

export async function transferFile(request: TransferRequest): Promise<void> {
  try {
    if (request.source.kind === "push") return await pushFile(request, request.source);
    if (request.node.kind === "local") return await fetchLocally(request, request.source);
    return await fetchOnNode(request, request.source);
  } catch (error) {
    // Bytes past the listed size are never kept, nor the bytes before them: the file is not the listed one.
    if (isShardctlError(error, "DownloadTooLarge")) await removePartial(request);
    throw error;
  }
}

type PartialFile = Pick<TransferRequest, "node" | "source" | "target">;

/** Remove the partial file and the record of its writer. */
export async function removePartial(partial: PartialFile): Promise<void> {
  await partial.node.remove(partial.target);
  await forgetWriter(partial);
}

/** Remove the record of the process that wrote a partial file on its node (only downloads run on an SSH node keep one). */
export async function forgetWriter({ node, source, target }: PartialFile): Promise<void> {
  if (source.kind === "hub" && node.kind !== "local") await node.remove(writerRecordOf(target));
}

/** The failure of a download whose body passes the file's listed size; `served` says what is known of its size. */
function tooLarge(request: TransferRequest, url: string, served: string): ShardctlError {
  const { node, file } = request;
  return new ShardctlError(
    "DownloadTooLarge",
    `node ${node.config.name}: ${file.path} is listed as ${file.size} bytes but is served as ${served} (${url}); the download was stopped and its partial file ${request.target} removed. The Hub's file list and its file disagree: check the endpoint (a mirror or proxy serving other content) or the repository at that revision`,
    { terminal: true },
  );
}

/** The failure of a reply that cannot be the rest of the listed file; `why` says how it differs. Retried: the next attempt may get the file. */
function notTheFile(request: TransferRequest, url: string, why: string): ShardctlError {
  return new ShardctlError(
    "DownloadFailed",
    `node ${request.node.config.name}: ${request.file.path}: ${url} answered ${why}: not the listed file (a proxy's or a rate limit's page sent as a success?); nothing of it is kept, and the download is tried again`,
  );
}

function fileUrl(source: Extract<StagingSource, { kind: "hub" }>, commit: string, path: string): string {
  const repo = source.repo.split("/").map(encodeURIComponent).join("/");
  return `${source.endpoint.replace(/\/+$/, "")}/${repo}/resolve/${encodeURIComponent(commit)}/${path.split("/").map(encodeURIComponent).join("/")}`;
}

async function fetchLocally(request: TransferRequest, source: Extract<StagingSource, { kind: "hub" }>): Promise<void> {
  const { file, target } = request;
  const url = fileUrl(source, request.commit, file.path);
  const headers: Record<string, string> = {};
  if (source.token !== undefined) headers.Authorization = `Bearer ${source.token}`;
  if (request.haveBytes > 0) headers.Range = `bytes=${request.haveBytes}-`;
  try {
    const raw = await rawDownload({
      url: new URL(url),
      headers,
      target,
      haveBytes: request.haveBytes,
      maxBytes: file.size,
      deadlineMs: request.deadlineMs,
      idleMs: request.idleMs,
      onBytes: request.onBytes,
      ...(request.signal === undefined ? {} : { signal: request.signal }),
    });
    if (raw.kind === "done") return;
    if (raw.kind === "too-large") throw tooLarge(request, url, `${raw.bytes} bytes`);
    if (raw.kind === "not-the-file") throw notTheFile(request, url, raw.why);
    if (raw.kind === "unsupported" && raw.busy !== undefined) throw new ShardctlError("DownloadFailed", `${url}: HTTP ${raw.busy}`);
  } catch (error) {
    if (isShardctlError(error, "DownloadTooLarge") || isShardctlError(error, "DownloadFailed")) throw error;
    throw new ShardctlError("DownloadFailed", `${url}: ${(error as Error).message}`, { cause: error });
  }
  const response = await openDownload(url, headers, request.deadlineMs, request.signal).catch((error: unknown) => error as Error);
  // A Range the server refuses (416: the partial file is not a prefix it recognises) cannot resume on
  // any pass: start the file over, once. A server ignoring Range (200) is handled below by rewriting.
  if (response instanceof Error) {
    if (request.haveBytes > 0 && response instanceof ShardctlError && / HTTP 416$/.test(response.message)) {
      await request.node.remove(target);
      return fetchLocally({ ...request, haveBytes: 0 }, source);
    }
    if (response instanceof ShardctlError && / HTTP 404$/.test(response.message)) throw new ShardctlError("DownloadFailed", `${response.message}${goneFromHub(request)}`);
    throw response;
  }
  // A server ignoring Range sends everything again: start the partial file over.
  const append = response.statusCode === 206;
  let done = append ? request.haveBytes : 0;
  const length = response.headers["content-length"];
  const knownLength = length !== undefined && /^\d+$/.test(length) ? Number(length) : undefined;
  if (knownLength !== undefined && done + knownLength > file.size) {
    response.destroy();
    throw tooLarge(request, url, `${done + knownLength} bytes`);
  }
  const rangeStart = /^bytes (\d+)-/.exec(response.headers["content-range"] ?? "");
  const why = replyMismatch(response.statusCode ?? 0, knownLength, rangeStart === null ? undefined : Number(rangeStart[1]), request.haveBytes, file.size);
  if (why !== undefined) {
    response.destroy();
    throw notTheFile(request, url, why);
  }
  const out = createWriteStream(target, { flags: append ? "a" : "w" });
  // A failed write (disk full, permissions) ends the download with that error.
  out.once("error", (error) => response.destroy(error));
  try {
    // node:http, not fetch: every chunk received before a cut is written (a web stream drops its
    // queued chunks when it errors), so a resume never re-fetches bytes that already arrived.
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => response.destroy(new Error(`deadline of ${request.deadlineMs} ms passed`)), request.deadlineMs);
      const idle = setTimeout(() => response.destroy(new Error(`nothing arrived for ${request.idleMs} ms`)), request.idleMs);
      // Socket reads arrive in 16-64 KiB pieces; one file write per piece costs a thread-pool round
      // trip each, so they are gathered into 8 MiB writevs.
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      // Back-pressure with hysteresis: pause above 128 MiB queued for the disk, resume below 32 MiB.
      // Waiting for 'drain' (queue empty) instead idles the socket on every cycle and halves the
      // throughput. While paused, chunks wait in the response and a cut would discard them, so the
      // pause is kept rare.
      let paused = false;
      const flush = (): void => {
        if (pendingBytes === 0) return;
        // Corked: the chunks go down as one writev, without copying them into one buffer first.
        out.cork();
        for (const [i, chunk] of pending.entries()) {
          out.write(
            chunk,
            i < pending.length - 1
              ? undefined
              : () => {
                  if (paused && out.writableLength < 32 << 20) {
                    paused = false;
                    response.resume();
                  }
                },
          );
        }
        out.uncork();
        pending = [];
        pendingBytes = 0;
        if (!paused && out.writableLength > 128 << 20) {
          paused = true;
          response.pause();
        }
      };
      response.on("data", (chunk: Buffer) => {
        if (response.destroyed) return;
        idle.refresh();
        // A body longer than the listed size (none was announced): stop before writing the chunk that passes it.
        if (done + chunk.length > file.size) {
          response.destroy(tooLarge(request, url, `more than ${file.size} bytes`));
          return;
        }
        done += chunk.length;
        pending.push(chunk);
        pendingBytes += chunk.length;
        if (pendingBytes >= 8 << 20) flush();
        request.onBytes(done);
      });
      response.once("end", flush);
      response.once("error", (error) => {
        flush();
        clearTimeout(timer);
        clearTimeout(idle);
        reject(error);
      });
      response.once("close", () => {
        flush();
        clearTimeout(timer);
        clearTimeout(idle);
        if (response.complete) resolve();
        else reject(new Error("connection closed before the end of the body"));
      });
    });
  } catch (error) {
    if (isShardctlError(error, "DownloadTooLarge")) throw error;
    throw new ShardctlError("DownloadFailed", `${url}: interrupted after ${done} of ${file.size} bytes: ${(error as Error).message}`, { cause: error });
  } finally {
    await new Promise<void>((resolve) => out.end(() => resolve()));
  }
}

/** GET `url`, following up to 5 redirects (the Hub redirects LFS files to its CDN). */
async function openDownload(url: string, headers: Record<string, string>, deadlineMs: number, signal: AbortSignal | undefined, hops = 0): Promise<IncomingMessage> {
  const response = await new Promise<IncomingMessage>((resolve, reject) => {
    const get = url.startsWith("https:") ? httpsGet : httpGet;
    // A whole-request timer, not a socket idle timeout (that one re-arms on every 64 KiB read).
    // The signal destroys the request, and with it the response's socket mid-body.
    const req = get(url, { headers, ...(signal === undefined ? {} : { signal }) }, (response) => {
      clearTimeout(timer);
      resolve(response);
    });
    const timer = setTimeout(() => req.destroy(new Error(`no response within ${deadlineMs} ms`)), deadlineMs);
    req.once("error", (error) => {
      clearTimeout(timer);
      reject(new ShardctlError("DownloadFailed", `${url}: ${error.message}`, { cause: error }));
    });
  });
  const status = response.statusCode ?? 0;
  if (status >= 300 && status < 400 && response.headers.location !== undefined && hops < 5) {
    response.resume();
    const next = new URL(response.headers.location, url).toString();
    // http and https only, as curl on the nodes is held to: said with both addresses.
    const protocol = new URL(next).protocol;
    if (protocol !== "http:" && protocol !== "https:") {
      throw new ShardctlError("DownloadFailed", `${url}: HTTP ${status} redirects to ${next}, which is not http or https; only those are followed`);
    }
    // Credentials stay with the Hub; a CDN gets none.
    const { Authorization: _, ...rest } = headers;
    return openDownload(next, new URL(next).origin === new URL(url).origin ? headers : rest, deadlineMs, signal, hops + 1);
  }
  if (status !== 200 && status !== 206) {
    response.resume();
    const more = status >= 300 && status < 400 ? (hops >= 5 ? " (a sixth redirect: at most 5 are followed)" : " (a redirect without a Location)") : "";
    throw new ShardctlError("DownloadFailed", `${url}: HTTP ${status}${more}`);
  }
  return response;
}

async function fetchOnNode(request: TransferRequest, source: Extract<StagingSource, { kind: "hub" }>): Promise<void> {
  const { node, file, target } = request;
  const url = fileUrl(source, request.commit, file.path);
  // curl config on stdin: the URL and token never appear in the node's process list.
  const config = [`url = ${curlQuote(url)}`, ...(source.token === undefined ? [] : [`header = ${curlQuote(`Authorization: Bearer ${source.token}`)}`])].join("\n");
  // --speed-limit/--speed-time: under 1 byte/s for idleMs (at least 1 s) ends curl (exit 28).
  const idleSec = String(Math.max(1, Math.round(request.idleMs / 1000)));
  // --proto, --proto-redir: a Hub (or a redirect it sends) cannot steer the node to another protocol
  // (ftp, file, …), whose silence the idle limit does not cut in time, or whose files it would read.
  const curl = [
    "curl",
    "--fail",
    "--silent",
    "--show-error",
    "--location",
    "--proto",
    "=http,https",
    "--proto-redir",
    "=http,https",
    "--speed-limit",
    "1",
    "--speed-time",
    idleSec,
    "--config",
    "-",
  ];
  // The program stops an earlier download still writing the file (its connection dropped), resumes
  // from the file's size then, and caps the body one byte past the listed size: a longer one shows
  // as a file past that size.
  const argv = ["sh", "-c", cappedCurlScript, "sh", String(file.size), target, request.haveBytes > 0 ? "append" : "new", ...curl];
  // Progress = the partial file's size, polled every 500 ms while curl runs.
  let timer: NodeJS.Timeout | undefined;
  let polling = true;
  const poll = (): void => {
    timer = setTimeout(() => {
      void node
        .stat(target)
        .then((st) => st !== undefined && polling && request.onBytes(Math.min(st.size, file.size)))
        .catch(() => undefined)
        .finally(() => polling && poll());
    }, 500);
  };
  poll();
  const result = await node
    .run(argv, { stdin: `${config}\n`, deadlineMs: request.deadlineMs, ...(request.signal === undefined ? {} : { signal: request.signal }) })
    .finally(() => {
      polling = false;
      clearTimeout(timer);
    });
  // Stopped: no question more for the node (a partitioned one would hold the caller until its keepalive gives up).
  if (request.signal?.aborted === true) throw new ShardctlError("DownloadFailed", `node ${node.config.name}: ${url}: stopped`);
  const after = await node.stat(target);
  if (after !== undefined && after.size > file.size) throw tooLarge(request, url, `more than ${file.size} bytes`);
  // The server cannot resume this file: it ignored the Range (curl exit 33) or refused it (HTTP 416,
  // exit 22). Resuming would fail the same way on every pass, so start the file over, once.
  if (request.haveBytes > 0 && !result.timedOut && (result.exitCode === 33 || (result.exitCode === 22 && /\b416\b/.test(result.stderr)))) {
    await node.remove(target);
    request.onBytes(0);
    return fetchOnNode({ ...request, haveBytes: 0 }, source);
  }
  if (result.exitCode !== 0) {
    const program = result.exitCode === 96 || result.exitCode === 97 ? "the download program" : "curl";
    const why = result.timedOut ? `timed out after ${result.durationMs} ms` : `${program} exited with ${result.exitCode}: ${result.stderr.trim()}`;
    const gone = /\berror: 404\b/.test(result.stderr) ? goneFromHub(request) : "";
    throw new ShardctlError("DownloadFailed", `node ${node.config.name}: ${url}: ${why}${gone}`);
  }
  // curl ended without an error short of the listed size: the reply said it was whole (a page sent
  // with a success status). What it appended cannot be told from the file's bytes: start over.
  if (after === undefined || after.size < file.size) {
    await removePartial(request);
    request.onBytes(0);
    throw notTheFile(request, url, `a reply that ended after ${after?.size ?? 0} of the listed ${file.size} bytes without an error; the partial file was removed`);
  }
  request.onBytes(after.size);
}

/**
 * What a 404 for a file of a pinned commit means: the Hub had it when the revision was planned and
 * has it no more (a revision deleted or rewritten). Retried all the same (a mirror's hiccup looks
 * alike), with what would end it.
 */
function goneFromHub(request: Pick<TransferRequest, "commit" | "file">): string {
  return `; the Hub no longer has ${request.file.path} at commit ${request.commit.slice(0, 12)}, which it listed when the revision was planned (a revision deleted or rewritten on the Hub): \`shardctl reconcile\` the cluster to plan it again from what the Hub has now (a branch is resolved anew), or pin [model] revision to a commit it has`;
}

function curlQuote(value: string): string {
  return `"${value.replace(/[\\"]/g, (c) => `\\${c}`)}"`;
}

async function pushFile(request: TransferRequest, source: Extract<StagingSource, { kind: "push" }>): Promise<void> {
  const local = join(source.dir, request.file.path);
  const path = request.file.path;
  // Every look at the source takes its turn with the directory's other reads (src/files/source-reads.ts):
  // pushes to many nodes from a mount that freezes hold one file-system thread, not one each.
  const size = (await readInTurn(source.dir, path, () => stat(local))).size;
  if (size !== request.file.size) throw new ShardctlError("PushSourceChanged", `${local} changed size since it was hashed (${request.file.size} → ${size} bytes)`);
  try {
    await request.node.putFile(local, request.target, {
      startOffset: request.haveBytes,
      onProgress: (bytes) => request.onBytes(request.haveBytes + bytes),
      readLocal: readChunkInTurn(source.dir, path),
      closeLocal: (close) => closeInTurn(source.dir, path, close),
      ...(request.signal === undefined ? {} : { signal: request.signal }),
    });
  } catch (error) {
    if (error instanceof ShardctlError) throw error;
    throw new ShardctlError("PushFailed", `node ${request.node.config.name}: pushing ${local}: ${(error as Error).message}`, { cause: error });
  }
}
