import { jsonErrorOf, quoteText, ShardctlError } from "../errors/index.js";

/** The safetensors format caps the JSON header at 100 MB (bytes). */
export const maxHeaderBytes = 100_000_000;

/** One tensor entry of a safetensors header; offsets are relative to the data buffer (bytes). */
export interface TensorEntry {
  name: string;
  dtype: string;
  shape: number[];
  begin: number;
  end: number;
}

/** A parsed safetensors header: its tensors in data-buffer order and the header's own size. */
export interface SafetensorsHeader {
  /** N, the JSON header length in bytes (the file starts with 8 + N bytes of framing). */
  headerBytes: number;
  /** Bytes of the data buffer actually covered by tensors (max end offset). */
  dataBytes: number;
  tensors: TensorEntry[];
  metadata: Record<string, string>;
}

/**
 * Every dtype the safetensors format defines, with its element size in bits (the sub-byte float
 * formats F4 and F6_* pack elements, so a tensor's bytes are elements × bits / 8). A name outside
 * this set is not a safetensors file any loader reads: it is refused, not skipped. A Map, not an
 * object literal: a header names the dtype, and "constructor" or "__proto__" must not find
 * Object.prototype's members.
 */
const elementBits = new Map<string, number>([
  ["BOOL", 8],
  ["F4", 4],
  ["F6_E2M3", 6],
  ["F6_E3M2", 6],
  ["U8", 8],
  ["I8", 8],
  ["F8_E5M2", 8],
  ["F8_E4M3", 8],
  ["F8_E8M0", 8],
  ["I16", 16],
  ["U16", 16],
  ["F16", 16],
  ["BF16", 16],
  ["I32", 32],
  ["U32", 32],
  ["F32", 32],
  ["C64", 64],
  ["F64", 64],
  ["I64", 64],
  ["U64", 64],
]);

/** The safetensors dtype names, for messages. */
export const safetensorsDtypes: readonly string[] = [...elementBits.keys()];

/** Bytes per element of a safetensors dtype name, or undefined when unknown or smaller than a byte. */
export function dtypeElementBytes(dtype: string): number | undefined {
  const bits = elementBits.get(dtype);
  return bits === undefined || bits % 8 !== 0 ? undefined : bits / 8;
}

/**
 * The header's own names (tensors, metadata keys, dtypes) are quoted into `message` with quoteText:
 * they are the model's text, and a newline or a terminal sequence in one must not make a line of
 * its own in `shardctl status`, `plan`, `diff` or a log.
 */
function invalid(file: string, message: string): ShardctlError {
  return new ShardctlError("SafetensorsHeaderInvalid", `${file}: ${message}`, { terminal: true });
}

/**
 * Decode the 8-byte little-endian header length N at the start of a safetensors file and check it
 * against the file size (bytes, when known) and the 100 MB cap.
 */
export function readHeaderLength(prefix: Uint8Array, file: string, fileSize?: number): number {
  if (prefix.length < 8) throw invalid(file, `file is ${prefix.length} bytes, too short for a safetensors header`);
  const view = new DataView(prefix.buffer, prefix.byteOffset, 8);
  const n = view.getBigUint64(0, true);
  if (n > BigInt(maxHeaderBytes)) throw invalid(file, `header length ${n} bytes exceeds the 100 MB limit`);
  const length = Number(n);
  if (fileSize !== undefined && 8 + length > fileSize) {
    throw invalid(file, `header length ${length} bytes exceeds the file size (${fileSize} bytes)`);
  }
  if (length < 2) throw invalid(file, `header length ${length} bytes is too short for a JSON object`);
  return length;
}

/**
 * The entries of a header's top-level JSON object (tensors, and `__metadata__`), counted from its
 * bytes without parsing them: how many tensors parsing would describe is known before it is done
 * (nested keys, within `__metadata__`, are not counted: the cap on header bytes bounds those). A
 * byte scan is enough: UTF-8 never puts a byte below 0x80 inside a multi-byte character, so quotes,
 * backslashes, braces and colons are found as bytes. For a malformed header the count is only a
 * guess; parsing refuses it anyway.
 */
export function countHeaderEntries(bytes: Uint8Array): number {
  let depth = 0;
  let inString = false;
  let count = 0;
  for (let i = 0; i < bytes.length; i++) {
    const b = bytes[i];
    if (inString) {
      // A backslash escapes the byte after it (\" stays inside the string).
      if (b === 0x5c) i++;
      else if (b === 0x22) inString = false;
    } else if (b === 0x22) inString = true;
    else if (b === 0x7b || b === 0x5b) depth++;
    else if (b === 0x7d || b === 0x5d) depth--;
    // Each top-level key is followed by the one colon at depth 1.
    else if (b === 0x3a && depth === 1) count++;
  }
  return count;
}

/**
 * Parse the N JSON header bytes of a safetensors file (read by the caller). `fileSize` (bytes,
 * when known) bounds the data offsets. Refuses what a loader would refuse: non-JSON, malformed
 * entries, offsets outside the data buffer, overlapping tensors, sizes that disagree with shape.
 */
export function parseSafetensorsHeader(bytes: Uint8Array, file: string, fileSize?: number): SafetensorsHeader {
  let parsed: unknown;
  try {
    parsed = JSON.parse(new TextDecoder("utf-8", { fatal: true }).decode(bytes));
  } catch (error) {
    throw invalid(file, `header is not valid JSON (${jsonErrorOf(error)})`);
  }
  if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) {
    throw invalid(file, "header is not a JSON object");
  }
  const dataLimit = fileSize === undefined ? undefined : fileSize - 8 - bytes.length;
  const tensors: TensorEntry[] = [];
  let metadata: Record<string, string> = {};
  for (const [name, value] of Object.entries(parsed as Record<string, unknown>)) {
    if (name === "__metadata__") {
      metadata = readMetadata(value, file);
      continue;
    }
    tensors.push(readEntry(name, value, file, dataLimit));
  }
  tensors.sort((a, b) => a.begin - b.begin || a.end - b.end);
  let dataBytes = 0;
  let previous: TensorEntry | undefined;
  for (const t of tensors) {
    // Zero-length tensors occupy no bytes and cannot overlap anything.
    if (previous !== undefined && t.begin < previous.end && t.end > t.begin) {
      throw invalid(file, `tensor ${quoteText(t.name)} data_offsets [${t.begin}, ${t.end}] overlap ${quoteText(previous.name)} [${previous.begin}, ${previous.end}]`);
    }
    if (t.end > t.begin) previous = t;
    dataBytes = Math.max(dataBytes, t.end);
  }
  return { headerBytes: bytes.length, dataBytes, tensors, metadata };
}

function readMetadata(value: unknown, file: string): Record<string, string> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid(file, "__metadata__ is not an object");
  const entries = Object.entries(value as Record<string, unknown>);
  for (const [k, v] of entries) {
    if (typeof v !== "string") throw invalid(file, `__metadata__[${quoteText(k)}] is not a string`);
  }
  // fromEntries defines each key as its own property: a "__proto__" key stays a key, not the prototype.
  return Object.fromEntries(entries) as Record<string, string>;
}

function readEntry(name: string, value: unknown, file: string, dataLimit: number | undefined): TensorEntry {
  if (typeof value !== "object" || value === null || Array.isArray(value)) throw invalid(file, `tensor ${quoteText(name)} entry is not an object`);
  const { dtype, shape, data_offsets: offsets } = value as Record<string, unknown>;
  if (typeof dtype !== "string") throw invalid(file, `tensor ${quoteText(name)} has no dtype`);
  if (!Array.isArray(shape) || !shape.every(isCount)) throw invalid(file, `tensor ${quoteText(name)} has no valid shape`);
  if (!Array.isArray(offsets) || offsets.length !== 2 || !offsets.every(isCount)) {
    throw invalid(file, `tensor ${quoteText(name)} has no valid data_offsets`);
  }
  const [begin, end] = offsets as [number, number];
  if (end < begin) throw invalid(file, `tensor ${quoteText(name)} data_offsets [${begin}, ${end}] end before they begin`);
  if (dataLimit !== undefined && end > dataLimit) {
    throw invalid(file, `tensor ${quoteText(name)} data_offsets [${begin}, ${end}] are out of range (data buffer is ${dataLimit} bytes)`);
  }
  const bits = elementBits.get(dtype);
  if (bits === undefined) {
    throw invalid(file, `tensor ${quoteText(name)} has dtype ${quoteText(dtype)}, which is not a safetensors dtype (${safetensorsDtypes.join(", ")})`);
  }
  // Exact arithmetic: a product of safe integers can pass 2^53, where doubles would round it.
  const elementCount = (shape as number[]).reduce((p, d) => p * BigInt(d), 1n);
  const expectedBits = elementCount * BigInt(bits);
  if (expectedBits % 8n !== 0n || expectedBits / 8n !== BigInt(end - begin)) {
    const needs = expectedBits % 8n === 0n ? `${expectedBits / 8n}` : `${expectedBits} bits, not a whole number of bytes`;
    throw invalid(file, `tensor ${quoteText(name)} holds ${end - begin} bytes but ${dtype} shape [${(shape as number[]).join(", ")}] needs ${needs}`);
  }
  return { name, dtype, shape: shape as number[], begin, end };
}

function isCount(v: unknown): v is number {
  return typeof v === "number" && Number.isSafeInteger(v) && v >= 0;
}
