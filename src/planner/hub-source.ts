import { jsonErrorOf, messageWithCauseOf, ShardctlError } from "../errors/index.js";
import { FileRefusedError, formatCap } from "../files/index.js";
import { readHeaderLength } from "./safetensors-header.js";
import type { ModelSource, RawHeader, SourceReader } from "./model-source.js";

type HubSource = Extract<ModelSource, { kind: "hub" }>;

/** Default deadline of each Hub request (ms). */
const defaultTimeoutMs = 30_000;
/** Bytes of a tree listing read at most (64 MiB, some 250,000 entries); a longer one is not read. */
const maxListingBytes = 64 * 1024 * 1024;

/**
 * Reads a model from a Hugging Face Hub-compatible endpoint with `GET {endpoint}/{repo}/resolve/
 * {revision}/{path}`. A safetensors header costs exactly two Range requests (`bytes=0-7`, then
 * `bytes=8-{8+N-1}`), so a plan is made before any weight is downloaded.
 */
export function createHubReader(source: HubSource): SourceReader {
  const base = `${source.endpoint.replace(/\/+$/, "")}/${source.repo}/resolve/${encodeURIComponent(source.revision)}/`;
  const where = `hub:${source.repo}@${source.revision}`;
  const urlOf = (path: string): string => base + path.split("/").map(encodeURIComponent).join("/");

  async function request(path: string, range?: [number, number]): Promise<Response | undefined> {
    const headers: Record<string, string> = {};
    if (source.token !== undefined) headers.authorization = `Bearer ${source.token}`;
    if (range !== undefined) headers.range = `bytes=${range[0]}-${range[1]}`;
    let response: Response;
    try {
      response = await fetch(urlOf(path), { headers, signal: AbortSignal.timeout(source.timeoutMs ?? defaultTimeoutMs) });
    } catch (error) {
      throw new ShardctlError("ModelSourceUnreachable", `${where}: GET ${path} failed (${messageWithCauseOf(error)})`, { terminal: false, cause: error });
    }
    if (response.ok) return response;
    await response.body?.cancel();
    const code = response.headers.get("x-error-code");
    if (response.status === 404 && (code === "RepoNotFound" || code === "RevisionNotFound")) {
      throw new ShardctlError(
        "ModelNotFound",
        `${where}: ${code === "RepoNotFound" ? "repository" : "revision"} not found at ${source.endpoint}: check [model] ${code === "RepoNotFound" ? "id" : "revision"} in the definition`,
        { terminal: true },
      );
    }
    if (response.status === 404) return undefined;
    if (response.status === 416 && range !== undefined) return response;
    if (response.status === 401 || response.status === 403) {
      const hint = source.token === undefined ? " (no token was given)" : " (the token was refused)";
      throw new ShardctlError("ModelSourceUnauthorized", `${where}: GET ${path} answered ${response.status}${hint}`, { terminal: true });
    }
    const busy = response.status === 429 || response.status === 503 ? ` (busy or rate limiting${retryAfterOf(response)}: asked again after the pass's back-off)` : "";
    throw new ShardctlError("ModelSourceUnreachable", `${where}: GET ${path} answered ${response.status}${busy}`, { terminal: false });
  }

  // Read bytes [start, end] (inclusive). A server that ignores Range answers 200 with the whole
  // file: read only what is needed and cancel the rest rather than download the weights.
  // The file's size is what the server says: Content-Range's total, or a 200's Content-Length;
  // undefined when it says neither (the header's own sizes are then checked against each other only).
  async function readRange(path: string, start: number, end: number): Promise<{ bytes: Uint8Array; fileSize: number | undefined } | undefined> {
    const response = await request(path, [start, end]);
    if (response === undefined) return undefined;
    if (response.status === 416) {
      const total = /\/(\d+)$/.exec(response.headers.get("content-range") ?? "");
      return { bytes: new Uint8Array(0), fileSize: total === null ? undefined : Number(total[1]) };
    }
    if (response.status === 206) {
      const total = /\/(\d+)$/.exec(response.headers.get("content-range") ?? "");
      // Only the range asked for is read: a server may send more (without end, even) under a 206.
      const bytes = await readPrefix(response, end - start + 1, `${where}/${path}`);
      return { bytes, fileSize: total === null ? undefined : Number(total[1]) };
    }
    const fileSize = Number(response.headers.get("content-length") ?? Number.NaN);
    const bytes = await readPrefix(response, end + 1, `${where}/${path}`);
    return { bytes: bytes.subarray(start), fileSize: Number.isFinite(fileSize) ? fileSize : undefined };
  }

  return {
    describe: () => where,
    readJson: async (path, maxBytes) => {
      const response = await request(path);
      if (response === undefined) return undefined;
      // Never buffer more than the cap: a declared length past it is refused unread, and a body
      // without one is read only to one byte past it.
      const refuse = (size: string): FileRefusedError =>
        new FileRefusedError(
          "FileTooLarge",
          `${where}/${path}`,
          `${path} is ${size} bytes, over the cap of ${maxBytes} bytes (${formatCap(maxBytes)}); a real one is far smaller`,
        );
      const declared = Number(response.headers.get("content-length") ?? Number.NaN);
      if (declared > maxBytes) {
        await response.body?.cancel();
        throw refuse(String(declared));
      }
      const body = await readPrefix(response, maxBytes + 1, `${where}/${path}`);
      if (body.length > maxBytes) throw refuse(`more than ${maxBytes}`);
      const text = new TextDecoder().decode(body);
      try {
        return JSON.parse(text) as unknown;
      } catch (error) {
        throw new ShardctlError("ModelFileInvalid", `${where}: ${path} is not valid JSON (${jsonErrorOf(error)})`, { terminal: true });
      }
    },
    readHeader: async (path, reserve): Promise<RawHeader | undefined> => {
      const prefix = await readRange(path, 0, 7);
      if (prefix === undefined) return undefined;
      const label = `${where}/${path}`;
      const length = readHeaderLength(prefix.bytes, label, prefix.fileSize);
      reserve?.(length);
      const header = await readRange(path, 8, 8 + length - 1);
      if (header === undefined || header.bytes.length !== length) {
        throw new ShardctlError("ModelSourceUnreachable", `${label}: header read returned ${header?.bytes.length ?? 0} of ${length} bytes`, { terminal: false });
      }
      return { bytes: header.bytes, fileSize: prefix.fileSize };
    },
    listsCheaply: source.files !== undefined,
    listFiles: async () => {
      if (source.files !== undefined) return [...source.files];
      const url = `${source.endpoint.replace(/\/+$/, "")}/api/models/${source.repo}/tree/${encodeURIComponent(source.revision)}?recursive=true`;
      try {
        const headers: Record<string, string> = source.token === undefined ? {} : { authorization: `Bearer ${source.token}` };
        const response = await fetch(url, { headers, signal: AbortSignal.timeout(source.timeoutMs ?? defaultTimeoutMs) });
        if (!response.ok) return undefined;
        // The listing only names files in a message: one past the cap is not worth reading.
        const body = await readPrefix(response, maxListingBytes + 1, url);
        if (body.length > maxListingBytes) return undefined;
        const entries = JSON.parse(new TextDecoder().decode(body)) as unknown;
        if (!Array.isArray(entries)) return undefined;
        return entries.flatMap((e: unknown) => {
          const rec = e as { type?: unknown; path?: unknown };
          return rec.type === "file" && typeof rec.path === "string" ? [rec.path] : [];
        });
      } catch {
        return undefined;
      }
    },
  };
}

/**
 * At most the first `count` bytes of a body; the rest is cancelled. Memory grows with what arrives,
 * not with `count`. A body that stops or drips past the request's deadline is ModelSourceUnreachable
 * naming `label` (the file), not the bare abort.
 */
async function readPrefix(response: Response, count: number, label: string): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let filled = 0;
  const reader = response.body?.getReader();
  if (reader === undefined) return new Uint8Array(0);
  try {
    while (filled < count) {
      const { done, value } = await reader.read();
      if (done) break;
      const take = value.subarray(0, Math.min(value.length, count - filled));
      chunks.push(take);
      filled += take.length;
    }
  } catch (error) {
    throw new ShardctlError("ModelSourceUnreachable", `${label}: reading the body failed after ${filled} bytes (${messageWithCauseOf(error)})`, {
      terminal: false,
      cause: error,
    });
  } finally {
    await reader.cancel().catch(() => undefined);
  }
  return Buffer.concat(chunks, filled);
}

/** ", it asks for 30 s" from a reply's Retry-After (seconds, or a date), or nothing. */
function retryAfterOf(response: Response): string {
  const value = response.headers.get("retry-after")?.trim();
  if (value === undefined || value === "") return "";
  const seconds = /^\d+$/.test(value) ? Number(value) : Math.round((Date.parse(value) - Date.now()) / 1000);
  return Number.isFinite(seconds) && seconds >= 0 ? `, it asks for ${seconds} s` : "";
}
