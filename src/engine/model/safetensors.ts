/**
 * A small safetensors reader: parses the headers of a model directory (single file or sharded with
 * model.safetensors.index.json) and reads single tensors by offset, so a stage never reads the
 * bytes of layers it does not hold.
 */
import { closeSync, openSync, readSync, readFileSync, existsSync } from "node:fs";
import { join } from "node:path";

/** Where one tensor lives: file, absolute byte offset and length, dtype and shape. */
export interface TensorEntry {
  name: string;
  file: string;
  dtype: string;
  shape: number[];
  /** Absolute offset in `file`, bytes. */
  offset: number;
  /** Length, bytes. */
  length: number;
}

// A header larger than this is refused (the format's own limit is 100 MB).
const maxHeaderBytes = 100 * 1024 * 1024;

/** Index every tensor of the model in `dir` by name. */
export function indexSafetensors(dir: string): Map<string, TensorEntry> {
  const indexFile = join(dir, "model.safetensors.index.json");
  const files = existsSync(indexFile) ? listIndexedFiles(indexFile) : ["model.safetensors"];
  const entries = new Map<string, TensorEntry>();
  for (const name of files) {
    for (const entry of readHeader(join(dir, name))) entries.set(entry.name, entry);
  }
  return entries;
}

function listIndexedFiles(indexFile: string): string[] {
  const parsed = JSON.parse(readFileSync(indexFile, "utf8")) as { weight_map?: Record<string, string> };
  if (parsed.weight_map === undefined || typeof parsed.weight_map !== "object") {
    throw new Error(`${indexFile}: no weight_map`);
  }
  return [...new Set(Object.values(parsed.weight_map))].sort();
}

/** Parse one file's header into tensor entries with absolute offsets. */
export function readHeader(file: string): TensorEntry[] {
  const fd = openSync(file, "r");
  try {
    const prefix = Buffer.alloc(8);
    if (readSync(fd, prefix, 0, 8, 0) !== 8) throw new Error(`${file}: too short for a safetensors header`);
    const headerLength = Number(prefix.readBigUInt64LE(0));
    if (headerLength > maxHeaderBytes) throw new Error(`${file}: header of ${headerLength} bytes exceeds ${maxHeaderBytes}`);
    const headerBytes = Buffer.alloc(headerLength);
    if (readSync(fd, headerBytes, 0, headerLength, 8) !== headerLength) throw new Error(`${file}: truncated header`);
    const header = JSON.parse(headerBytes.toString("utf8")) as Record<string, unknown>;
    const entries: TensorEntry[] = [];
    for (const [name, value] of Object.entries(header)) {
      if (name === "__metadata__") continue;
      const v = value as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
      if (typeof v.dtype !== "string" || !Array.isArray(v.shape) || !Array.isArray(v.data_offsets)) {
        throw new Error(`${file}: malformed header entry for ${name}`);
      }
      const [begin, end] = v.data_offsets as number[];
      if (typeof begin !== "number" || typeof end !== "number" || end < begin) throw new Error(`${file}: bad data_offsets for ${name}`);
      entries.push({ name, file, dtype: v.dtype, shape: v.shape as number[], offset: 8 + headerLength + begin, length: end - begin });
    }
    return entries;
  } finally {
    closeSync(fd);
  }
}

/**
 * Read one tensor's bytes into a fresh, 8-byte aligned ArrayBuffer (so typed-array views of any
 * element size are valid).
 */
export function readTensorBytes(entry: TensorEntry): ArrayBuffer {
  const buffer = new ArrayBuffer(entry.length);
  const view = new Uint8Array(buffer);
  const fd = openSync(entry.file, "r");
  try {
    let done = 0;
    while (done < entry.length) {
      const n = readSync(fd, view, done, entry.length - done, entry.offset + done);
      if (n <= 0) throw new Error(`${entry.file}: unexpected end of file reading ${entry.name}`);
      done += n;
    }
  } finally {
    closeSync(fd);
  }
  return buffer;
}
