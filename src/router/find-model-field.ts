/**
 * Finds a request body's top-level `model` member by scanning its bytes once, without building the
 * document: the router runs inside the daemon, and JSON.parse of a 32 MiB body of tiny objects
 * holds the daemon's event loop for seconds. Strings are skipped with a native indexOf of the next
 * quote; nesting is a depth counter.
 *
 * It does not validate the document: what lies outside the top-level keys and the `model` values is
 * only skipped, so a body that is not JSON may still yield a model. The backend parses the body and
 * answers that; the router needs only the model to route, and where to write the upstream name.
 */

/** Byte offsets [start, end) of a string token in the body, its quotes included. */
export type ByteSpan = [start: number, end: number];

export type ModelField = {
  /** The value JSON.parse would give `model`: the last top-level `model` member's. */
  model: string;
  /** Every top-level `model` member whose value is a string: its value's token, in body order. */
  spans: ByteSpan[];
};

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const COLON = 0x3a;
const COMMA = 0x2c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;

/** "model" as UTF-8 bytes. */
const MODEL = [0x6d, 0x6f, 0x64, 0x65, 0x6c];
/**
 * Bytes between the quotes of a key that may spell `model` with escapes: each letter is written
 * either as itself (1 byte) or as `\uXXXX` (6 bytes), and at least one is escaped. Other lengths
 * cannot be `model` and are never decoded.
 */
const ESCAPED_MODEL_MIN_BYTES = 4 + 6;
const ESCAPED_MODEL_MAX_BYTES = 5 * 6;

/**
 * The top-level `model` of a JSON body, and where its string value tokens lie; undefined when the
 * body is not an object at the top level, has no top-level `model`, or the `model` JSON.parse would
 * keep (the last duplicate, as JSON.parse and Python's json do) is not a string. Also undefined for
 * what is plainly not JSON on the way: an unterminated string, a top-level key without `:`, an
 * unclosed top-level object or anything but whitespace after it, an undecodable `model` value.
 */
export function findModelField(body: Uint8Array): ModelField | undefined {
  let at = skipWhitespace(body, 0);
  if (body[at] !== OPEN_OBJECT) return undefined;
  at += 1;
  let depth = 1;
  // At depth 1, whether the next string is a key: after the opening brace and after each comma.
  let expectKey = true;
  const spans: ByteSpan[] = [];
  // The last top-level `model` value's token; undefined when it is not a string (or there is none).
  let last: ByteSpan | undefined;
  while (at < body.length) {
    const byte = body[at];
    if (byte === QUOTE) {
      const end = findStringEnd(body, at);
      if (end === undefined) return undefined;
      if (depth !== 1 || !expectKey) {
        at = end;
        continue;
      }
      // A top-level key: its `:` must follow, then its value.
      const isModel = isModelKey(body, at, end);
      const colon = skipWhitespace(body, end);
      if (body[colon] !== COLON) return undefined;
      const value = skipWhitespace(body, colon + 1);
      expectKey = false;
      if (!isModel) {
        at = value;
        continue;
      }
      if (body[value] !== QUOTE) {
        last = undefined;
        at = value;
        continue;
      }
      const valueEnd = findStringEnd(body, value);
      if (valueEnd === undefined) return undefined;
      last = [value, valueEnd];
      spans.push(last);
      at = valueEnd;
      continue;
    }
    if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) depth += 1;
    else if (byte === CLOSE_OBJECT || byte === CLOSE_ARRAY) {
      depth -= 1;
      if (depth === 0) break;
    } else if (byte === COMMA && depth === 1) expectKey = true;
    at += 1;
  }
  if (depth !== 0 || skipWhitespace(body, at + 1) !== body.length) return undefined;
  if (last === undefined) return undefined;
  const model = decodeString(body, last);
  return model === undefined ? undefined : { model, spans };
}

/** The offset just past the string token opening at `start` (a quote); undefined when unterminated. */
function findStringEnd(body: Uint8Array, start: number): number | undefined {
  let quote = body.indexOf(QUOTE, start + 1);
  while (quote !== -1) {
    // Escaped only when an odd number of backslashes precede it; the runs counted never overlap,
    // so the whole scan stays linear.
    let backslashes = 0;
    while (body[quote - 1 - backslashes] === BACKSLASH) backslashes += 1;
    if (backslashes % 2 === 0) return quote + 1;
    quote = body.indexOf(QUOTE, quote + 1);
  }
  return undefined;
}

/** Whether the key token [start, end) is `model`, plainly or with escapes (a key that does not decode is not). */
function isModelKey(body: Uint8Array, start: number, end: number): boolean {
  const length = end - start - 2;
  if (length === MODEL.length) return MODEL.every((byte, index) => body[start + 1 + index] === byte);
  if (length < ESCAPED_MODEL_MIN_BYTES || length > ESCAPED_MODEL_MAX_BYTES) return false;
  if (!body.subarray(start + 1, end - 1).includes(BACKSLASH)) return false;
  return decodeString(body, [start, end]) === "model";
}

/** The string a token decodes to, as JSON.parse reads it; undefined when the token is not valid JSON. */
function decodeString(body: Uint8Array, [start, end]: ByteSpan): string | undefined {
  try {
    return JSON.parse(Buffer.from(body.buffer, body.byteOffset + start, end - start).toString("utf8")) as string;
  } catch {
    return undefined;
  }
}

/** The first offset at or after `from` that is not JSON whitespace (space, tab, LF, CR). */
function skipWhitespace(body: Uint8Array, from: number): number {
  let at = from;
  while (at < body.length) {
    const byte = body[at];
    if (byte !== 0x20 && byte !== 0x09 && byte !== 0x0a && byte !== 0x0d) break;
    at += 1;
  }
  return at;
}
