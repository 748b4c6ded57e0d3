/**
 * A small safetensors reader: parses the headers of a model directory (single file or sharded with
 * model.safetensors.index.json) and reads single tensors by offset, so a stage never reads the
 * bytes of layers it does not hold.
 */
import { closeSync, existsSync, fstatSync, openSync, readSync } from "node:fs";
import { join } from "node:path";
import { readJsonFile } from "./read-json-file.js";

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

/** Bytes per element of the safetensors dtypes of whole bytes (sub-byte ones are not checked here). */
const elementBytes = new Map<string, number>([
  ["BOOL", 1],
  ["U8", 1],
  ["I8", 1],
  ["F8_E5M2", 1],
  ["F8_E4M3", 1],
  ["F8_E8M0", 1],
  ["I16", 2],
  ["U16", 2],
  ["F16", 2],
  ["BF16", 2],
  ["I32", 4],
  ["U32", 4],
  ["F32", 4],
  ["I64", 8],
  ["U64", 8],
  ["F64", 8],
]);

/** The tensors of a model by name; a tensor's file header is read only when a tensor of that file is asked for. */
export interface TensorIndex {
  get(name: string): TensorEntry | undefined;
  /** Every tensor name of the model (from the index's weight map, or the single file's header). */
  keys(): Iterable<string>;
}

/**
 * Index the tensors of the model in `dir`. A sharded model's headers are read lazily, file by file,
 * so a stage whose node holds only the shards its layers need (as staging places them) never opens
 * the others.
 */
export function indexSafetensors(dir: string): TensorIndex {
  const indexFile = join(dir, "model.safetensors.index.json");
  if (!existsSync(indexFile)) {
    const entries = new Map(readHeader(join(dir, "model.safetensors")).map((e) => [e.name, e]));
    return { get: (name) => entries.get(name), keys: () => entries.keys() };
  }
  const weightMap = readWeightMap(indexFile);
  const headers = new Map<string, Map<string, TensorEntry>>();
  return {
    get(name) {
      const file = weightMap.get(name);
      if (file === undefined) return undefined;
      let entries = headers.get(file);
      if (entries === undefined) {
        entries = new Map(readHeader(join(dir, file)).map((e) => [e.name, e]));
        headers.set(file, entries);
      }
      return entries.get(name);
    },
    keys: () => weightMap.keys(),
  };
}

/** Tensor name → file, from model.safetensors.index.json; file names must stay inside the model directory. */
function readWeightMap(indexFile: string): Map<string, string> {
  const parsed = readJsonFile(indexFile) as { weight_map?: Record<string, unknown> };
  if (parsed.weight_map === undefined || parsed.weight_map === null || typeof parsed.weight_map !== "object") {
    throw new Error(`${indexFile}: no weight_map`);
  }
  const map = new Map<string, string>();
  for (const [name, file] of Object.entries(parsed.weight_map)) {
    if (typeof file !== "string" || file.includes("/") || file.includes("\\") || file === ".." || file.includes("\0")) {
      throw new Error(`${indexFile}: weight_map entry ${name} names ${JSON.stringify(file)}, not a file of the model directory`);
    }
    map.set(name, file);
  }
  return map;
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
    let header: unknown;
    try {
      header = JSON.parse(headerBytes.toString("utf8"));
    } catch {
      throw new Error(`${file}: the safetensors header is not valid JSON`);
    }
    if (typeof header !== "object" || header === null || Array.isArray(header)) throw new Error(`${file}: the safetensors header is not a JSON object`);
    // The bytes after the header: every tensor must lie inside them, or its read would take what
    // follows it in memory rather than fail.
    const dataBytes = fstatSync(fd).size - 8 - headerLength;
    const entries: TensorEntry[] = [];
    for (const [name, value] of Object.entries(header)) {
      if (name === "__metadata__") continue;
      entries.push(readEntry(file, name, value, dataBytes, 8 + headerLength));
    }
    return entries;
  } finally {
    closeSync(fd);
  }
}

/** One header entry, checked: whole offsets inside the data, and as many bytes as its dtype and shape need. */
function readEntry(file: string, name: string, value: unknown, dataBytes: number, dataStart: number): TensorEntry {
  const v = (typeof value === "object" && value !== null ? value : {}) as { dtype?: unknown; shape?: unknown; data_offsets?: unknown };
  if (typeof v.dtype !== "string" || !Array.isArray(v.shape) || !v.shape.every(isCount) || !Array.isArray(v.data_offsets)) {
    throw new Error(`${file}: malformed header entry for tensor "${name}" (it needs a dtype, a shape of whole numbers and data_offsets)`);
  }
  const [begin, end] = v.data_offsets as unknown[];
  if (v.data_offsets.length !== 2 || !isCount(begin) || !isCount(end) || end < begin) {
    throw new Error(`${file}: tensor "${name}" has data_offsets ${JSON.stringify(v.data_offsets)}, not two whole numbers [begin, end] with begin <= end`);
  }
  if (end > dataBytes)
    throw new Error(
      `${file}: tensor "${name}" data_offsets [${begin}, ${end}] run past the end of the file's data (${dataBytes} bytes): the file is truncated or its header is wrong`,
    );
  const shape = v.shape as number[];
  const size = elementBytes.get(v.dtype);
  if (size !== undefined) {
    // Exact: a product of safe integers can pass 2^53, where doubles round.
    const needs = shape.reduce((p, d) => p * BigInt(d), 1n) * BigInt(size);
    if (needs !== BigInt(end - begin)) throw new Error(`${file}: tensor "${name}" holds ${end - begin} bytes but ${v.dtype} shape [${shape.join(", ")}] needs ${needs}`);
  }
  return { name, file, dtype: v.dtype, shape, offset: dataStart + begin, length: end - begin };
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}

/**
 * Read one tensor's bytes into a fresh, 8-byte aligned ArrayBuffer (so typed-array views of any
 * element size are valid).
 */
export function readTensorBytes(entry: TensorEntry): ArrayBuffer {
  const buffer = new ArrayBuffer(entry.length);
  readTensorInto(entry, new Uint8Array(buffer));
  return buffer;
}

/** Read one tensor's bytes into `view` (exactly `entry.length` bytes, e.g. a kernel arena's memory). */
export function readTensorInto(entry: TensorEntry, view: Uint8Array): void {
  if (view.length !== entry.length) throw new Error(`${entry.name}: ${entry.length} bytes do not fit a view of ${view.length}`);
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
}
