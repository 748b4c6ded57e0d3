/**
 * A plain-HTTP GET that streams the body straight from the socket into a file: reads land in one
 * 4 MiB buffer (net's `onread`) and are written synchronously before the next read, as curl does.
 * Node's HTTP client hands out 64 KiB chunks through the stream machinery and, with asynchronous
 * file writes beside it, reached about 0.6× curl's throughput on a 2-core node; this path matches it.
 * Every byte that arrived is on disk when the connection drops, so a resume re-fetches nothing.
 *
 * Only the simple case is handled: http:, a 200/206 with Content-Length. Anything else (https,
 * redirects, chunked bodies, errors) returns "unsupported" before a byte is written, and the caller
 * falls back to node:http. A Content-Length that would leave more than `maxBytes` in the file returns
 * "too-large", and a reply that cannot be the rest of the file (see replyMismatch) "not-the-file",
 * both before a byte is written. No byte for `idleMs` ends the download as a failure (the bytes
 * that arrived stay in the file).
 */
import { closeSync, openSync, writeSync } from "node:fs";
import { connect } from "node:net";

export type RawOutcome =
  | { kind: "done"; status: number }
  /** `busy`: the server said so (HTTP 429 or 503): asking again at once, by the other path, would only prolong it. */
  | { kind: "unsupported"; busy?: number }
  /** `bytes`: what the file would have held with the whole body (the bytes kept plus Content-Length). */
  | { kind: "too-large"; bytes: number }
  /** `why`: how the reply differs from the rest of the listed file. */
  | { kind: "not-the-file"; why: string };

export interface RawRequest {
  url: URL;
  headers: Record<string, string>;
  target: string;
  /** Bytes already in target (sent as a Range by the caller's headers). */
  haveBytes: number;
  /** The most bytes the file may hold (its listed size); a longer body is refused before it is written. */
  maxBytes: number;
  deadlineMs: number;
  /** The longest wait for a byte, ms. */
  idleMs: number;
  /** Called with the bytes now in the file. */
  onBytes: (bytes: number) => void;
  /** Cuts the download when aborted (what reached the file stays there). */
  signal?: AbortSignal;
}

export function rawDownload(request: RawRequest): Promise<RawOutcome> {
  const { url } = request;
  if (url.protocol !== "http:") return Promise.resolve({ kind: "unsupported" });
  return new Promise<RawOutcome>((resolve, reject) => {
    const buffer = Buffer.allocUnsafe(4 << 20);
    let head: Buffer | undefined = Buffer.alloc(0);
    let fd: number | undefined;
    let remaining = 0;
    let written = 0;
    let settled = false;
    const finish = (error: Error | undefined, outcome?: RawOutcome): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(idle);
      request.signal?.removeEventListener("abort", onAbort);
      if (fd !== undefined) closeSync(fd);
      socket.destroy();
      if (error !== undefined) reject(error);
      else resolve(outcome!);
    };
    const body = (chunk: Buffer): void => {
      const take = Math.min(chunk.length, remaining);
      if (take > 0) writeSync(fd!, chunk, 0, take);
      remaining -= take;
      written += take;
      request.onBytes(written);
    };
    const socket = connect({
      host: url.hostname.replace(/^\[|\]$/g, ""),
      port: Number(url.port || 80),
      onread: {
        buffer,
        callback: (nread: number, buf: Uint8Array): boolean => {
          try {
            idle.refresh();
            const data = Buffer.from(buf.buffer, buf.byteOffset, nread);
            if (head !== undefined) {
              head = Buffer.concat([head, data]);
              const end = head.indexOf("\r\n\r\n");
              if (end < 0) {
                if (head.length > 64 * 1024) finish(new Error("response header too large"));
                return true;
              }
              const headText = head.subarray(0, end).toString("latin1");
              const parsed = parseHead(headText);
              const rest = head.subarray(end + 4);
              head = undefined;
              if (parsed === undefined) {
                const status = statusOf(headText);
                finish(undefined, status === 429 || status === 503 ? { kind: "unsupported", busy: status } : { kind: "unsupported" });
                return false;
              }
              const append = parsed.status === 206;
              const total = (append ? request.haveBytes : 0) + parsed.contentLength;
              if (total > request.maxBytes) {
                finish(undefined, { kind: "too-large", bytes: total });
                return false;
              }
              const why = replyMismatch(parsed.status, parsed.contentLength, parsed.rangeStart, request.haveBytes, request.maxBytes);
              if (why !== undefined) {
                finish(undefined, { kind: "not-the-file", why });
                return false;
              }
              fd = openSync(request.target, append ? "a" : "w");
              written = append ? request.haveBytes : 0;
              remaining = parsed.contentLength;
              statusCode = parsed.status;
              body(rest);
            } else {
              body(data);
            }
            if (remaining === 0) finish(undefined, { kind: "done", status: statusCode });
          } catch (error) {
            finish(error as Error);
          }
          return true;
        },
      },
    });
    let statusCode = 0;
    const timer = setTimeout(() => finish(new Error(`deadline of ${request.deadlineMs} ms passed`)), request.deadlineMs);
    const idle = setTimeout(() => finish(new Error(`nothing arrived for ${request.idleMs} ms`)), request.idleMs);
    const onAbort = (): void => finish(abortedError(request.signal));
    request.signal?.addEventListener("abort", onAbort, { once: true });
    if (request.signal?.aborted === true) onAbort();
    socket.once("connect", () => {
      const lines = [
        `GET ${url.pathname}${url.search} HTTP/1.1`,
        `Host: ${url.host}`,
        "Connection: close",
        "User-Agent: shardctl",
        ...Object.entries(request.headers).map(([k, v]) => `${k}: ${v}`),
      ];
      socket.write(`${lines.join("\r\n")}\r\n\r\n`);
    });
    socket.once("error", (error) => finish(error));
    socket.once("close", () => {
      if (head !== undefined) finish(new Error("connection closed before the response header"));
      else finish(new Error(`connection closed with ${remaining} bytes of the body missing (${written} in the file)`));
    });
  });
}

/** A reply head's status code (NaN when its first line is not an HTTP/1 status line). */
function statusOf(head: string): number {
  return Number(/^HTTP\/1\.[01] (\d{3})/.exec(head)?.[1]);
}

function parseHead(text: string): { status: number; contentLength: number; rangeStart: number | undefined } | undefined {
  const [, ...lines] = text.split("\r\n");
  const status = statusOf(text);
  if (status !== 200 && status !== 206) return undefined;
  const headers = new Map(lines.map((l) => [l.slice(0, l.indexOf(":")).trim().toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]));
  const length = headers.get("content-length");
  if (headers.has("transfer-encoding") || length === undefined || !/^\d+$/.test(length)) return undefined;
  const range = /^bytes (\d+)-/.exec(headers.get("content-range") ?? "");
  return { status, contentLength: Number(length), rangeStart: range === null ? undefined : Number(range[1]) };
}

/**
 * Why a 200 or 206 reply cannot be the rest of a file listed as `size` bytes of which `have` are
 * already here, or undefined when it can: a whole body (200) of another length, a range that does
 * not start where the file ends, or one that ends short of the listed size. Such a reply is
 * typically a proxy's or a rate limit's page sent with a success status: writing it would spoil the
 * file (or throw away the bytes already here), and asking again later may well bring the file.
 * Unknown lengths pass (a longer body is stopped as it arrives).
 */
export function replyMismatch(status: number, contentLength: number | undefined, rangeStart: number | undefined, have: number, size: number): string | undefined {
  if (status === 200) {
    return contentLength === undefined || contentLength === size ? undefined : `HTTP 200 with a body of ${contentLength} bytes, not the listed ${size}`;
  }
  if (rangeStart !== undefined && rangeStart !== have) return `HTTP 206 with bytes from ${rangeStart}, not from ${have} as asked`;
  if (contentLength !== undefined && have + contentLength < size) return `HTTP 206 with ${contentLength} bytes from ${have}, ending short of the listed ${size}`;
  return undefined;
}

/** The error a download cut by its signal ends in: the signal's reason when it is an error. */
export function abortedError(signal: AbortSignal | undefined): Error {
  const reason: unknown = signal?.reason;
  return reason instanceof Error ? reason : new Error("staging was stopped");
}
