/**
 * Reading a file that someone else controls (a definition, settings, a model's config.json, a
 * router's YAML) without letting it hang or exhaust us. The file is opened once, and the opened
 * descriptor — not the path, which could be swapped between a check and the read — is asked what it
 * is: only a regular file is read, and only when it is within the caller's size cap.
 *
 * The open itself must not block either: opening a FIFO for reading waits until a writer appears,
 * for ever. O_NONBLOCK makes that open return at once (for a regular file it changes nothing), and
 * O_NOCTTY keeps a terminal device from becoming our controlling terminal before it is refused.
 */
import { constants, type Stats } from "node:fs";
import { open, stat, type FileHandle } from "node:fs/promises";
import { ShardctlError, type FileReason } from "../errors/index.js";

const openFlags = constants.O_RDONLY | constants.O_NONBLOCK | constants.O_NOCTTY;

/** Bytes read per call when reading a file whole: large enough for few calls, small enough to grow in steps. */
const chunkBytes = 64 * 1024;

export interface RegularFileOptions {
  /** Largest size accepted, bytes. A larger file (or one that grows past it while read) is refused. */
  maxBytes: number;
  /** What the file is, for messages: "cluster definition", "config.json". Default "file". */
  what?: string;
}

/** An opened regular file: its handle (the caller closes it) and its size when opened, bytes. */
export interface OpenedRegularFile {
  handle: FileHandle;
  size: number;
}

/**
 * Opens `path` for reading and checks, on the opened descriptor, that it is a regular file of at
 * most `maxBytes` bytes (no cap when omitted: for files only ever streamed or read in part, such as
 * weights). Open failures (ENOENT, EACCES) are thrown as Node's errors, so callers keep telling
 * "missing" from the rest; a FIFO, directory, device or socket throws ShardctlError `NotRegularFile`
 * and a file above the cap `FileTooLarge` (both terminal: only changing the file helps).
 */
export async function openRegularFile(path: string, options: Partial<RegularFileOptions> = {}): Promise<OpenedRegularFile> {
  const what = options.what ?? "file";
  let handle: FileHandle;
  try {
    handle = await open(path, openFlags);
  } catch (error) {
    // A UNIX socket cannot be opened at all (ENXIO); say what it is rather than "no such device".
    if ((error as NodeJS.ErrnoException).code === "ENXIO") {
      const kind = await stat(path).then(describeKind, () => "not a regular file");
      throw notRegular(path, what, kind, error);
    }
    throw error;
  }
  try {
    const info = await handle.stat();
    if (!info.isFile()) throw notRegular(path, what, describeKind(info));
    if (options.maxBytes !== undefined && info.size > options.maxBytes) throw tooLarge(path, what, info.size, options.maxBytes);
    return { handle, size: info.size };
  } catch (error) {
    await handle.close().catch(() => undefined);
    throw error;
  }
}

/** Reads a regular file of at most `maxBytes` whole, as bytes (see `openRegularFile` for what is refused). */
export async function readRegularFile(path: string, options: RegularFileOptions): Promise<Buffer> {
  const { handle } = await openRegularFile(path, options);
  try {
    // Read until end of file rather than trusting the size from fstat: the file may grow meanwhile,
    // and a file past the cap is refused even then.
    const chunks: Buffer[] = [];
    let total = 0;
    for (;;) {
      const chunk = Buffer.allocUnsafe(Math.min(chunkBytes, options.maxBytes + 1 - total));
      const { bytesRead } = await handle.read(chunk, 0, chunk.length, null);
      if (bytesRead === 0) break;
      chunks.push(chunk.subarray(0, bytesRead));
      total += bytesRead;
      if (total > options.maxBytes) throw tooLarge(path, options.what ?? "file", total, options.maxBytes, "grew while it was read: at least ");
    }
    return Buffer.concat(chunks, total);
  } finally {
    await handle.close().catch(() => undefined);
  }
}

/** Reads a regular file of at most `maxBytes` whole, as UTF-8 text. */
export async function readRegularText(path: string, options: RegularFileOptions): Promise<string> {
  return (await readRegularFile(path, options)).toString("utf8");
}

/** "a FIFO (named pipe)", "a directory", …: what a non-regular file is, for messages. */
function describeKind(info: Stats): string {
  if (info.isFile()) return "a regular file";
  if (info.isDirectory()) return "a directory";
  if (info.isFIFO()) return "a FIFO (named pipe)";
  if (info.isSocket()) return "a socket";
  if (info.isCharacterDevice()) return "a character device";
  if (info.isBlockDevice()) return "a block device";
  return "not a regular file";
}

/**
 * A file refused before it was read. `message` is "<path>: <detail>"; `detail` alone is for callers
 * that name the file themselves (a definition's issue is already "file:line:col: …").
 */
export class FileRefusedError extends ShardctlError {
  declare readonly reason: FileReason;
  readonly path: string;
  readonly detail: string;

  constructor(reason: FileReason, path: string, detail: string, cause?: unknown) {
    super(reason, `${path}: ${detail}`, { terminal: true, cause });
    this.name = "FileRefusedError";
    this.path = path;
    this.detail = detail;
  }
}

function notRegular(path: string, what: string, kind: string, cause?: unknown): FileRefusedError {
  return new FileRefusedError("NotRegularFile", path, `the ${what} is ${kind}, not a regular file; only regular files are read — replace it with the file itself`, cause);
}

function tooLarge(path: string, what: string, size: number, maxBytes: number, prefix = ""): FileRefusedError {
  return new FileRefusedError(
    "FileTooLarge",
    path,
    `the ${what} is ${prefix}${size} bytes, over the cap of ${maxBytes} bytes (${formatCap(maxBytes)}); a real one is far smaller — check that this is the right file`,
  );
}

/** 1048576 → "1 MiB": caps are powers of two, so this is exact for the ones we set. */
export function formatCap(bytes: number): string {
  for (const [unit, size] of [
    ["GiB", 1024 ** 3],
    ["MiB", 1024 ** 2],
    ["KiB", 1024],
  ] as const) {
    if (bytes >= size && bytes % size === 0) return `${bytes / size} ${unit}`;
  }
  return `${bytes} bytes`;
}
