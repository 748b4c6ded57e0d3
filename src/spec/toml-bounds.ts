/**
 * Bounds on what a TOML document may hold before anything walks it recursively (zod, the key
 * locator, deepFreeze, the cross-field checks). smol-toml itself refuses inline arrays and tables
 * nested deeper than 1000, but not dotted keys or table headers (`a.b.c.… = 1`, `[a.b.c.…]`), which
 * it turns into objects of any depth; and a 200,000-element array parses fine and then costs a
 * stack frame per element in code that spreads issue lists. A document past these bounds is one
 * located issue, never a stack overflow or a minutes-long scan.
 */
import { formatCap } from "../files/index.js";
import { formatPath } from "./issues.js";
import type { KeyPath } from "./locate.js";
import type { SpecIssue } from "./types.js";

export const tomlBounds = {
  /** Tables and arrays nested in each other, levels. No key of a definition or the settings nests more than 3 deep. */
  maxDepth: 16,
  /** Elements of one array. A cluster lists at most 256 nodes and 64 extra_args; 4096 leaves room for any future list. */
  maxArrayLength: 4096,
  /** Keys of one table. The node registry is the widest table; 4096 nodes is far beyond any real cluster. */
  maxTableKeys: 4096,
  /** Keys and elements in the whole document. A definition holds a few dozen; 4096 registered nodes with all of their dozen keys come to about 53,000. */
  maxValues: 65_536,
} as const;

/**
 * Text handed to a parse function directly (not through a loader that capped the file) is held to
 * the same cap, so every way into the parser is bounded. `maxBytes` in bytes of UTF-8.
 */
export function checkTextSize(text: string, file: string, maxBytes: number, what: string): SpecIssue | undefined {
  // A character is at most 3 UTF-8 bytes in a JS string (surrogate pairs: 4 per 2), so short text skips the count.
  if (text.length * 3 <= maxBytes) return undefined;
  const bytes = Buffer.byteLength(text, "utf8");
  if (bytes <= maxBytes) return undefined;
  return {
    file,
    line: 1,
    col: 1,
    path: "",
    message: `the ${what} is ${bytes} bytes, over the cap of ${maxBytes} bytes (${formatCap(maxBytes)}); a real one is far smaller`,
  };
}

/** The first bound `data` (parsed TOML) breaks, as an issue located at the offending key; undefined when within bounds. */
export function checkTomlBounds(data: unknown, text: string, file: string): SpecIssue | undefined {
  const problem = findBoundProblem(data);
  if (problem === undefined) return undefined;
  const { line, col } = locateTopKey(text, problem.path[0]);
  return { file, line, col, path: formatPath(problem.path), message: problem.message };
}

/** The first bound broken, walking iteratively (the walk itself must not recurse as deep as the data). */
function findBoundProblem(data: unknown): { path: KeyPath; message: string } | undefined {
  const stack: Array<{ value: unknown; path: KeyPath }> = [{ value: data, path: [] }];
  let values = 0;
  while (stack.length > 0) {
    const { value, path } = stack.pop()!;
    const array = Array.isArray(value);
    if (!array && !isTable(value)) continue;
    if (path.length >= tomlBounds.maxDepth) {
      return { path, message: `nests deeper than ${tomlBounds.maxDepth} levels of tables and arrays; no setting nests more than 3 deep — remove the extra nesting` };
    }
    if (array && value.length > tomlBounds.maxArrayLength) {
      return { path, message: `has ${value.length} elements; at most ${tomlBounds.maxArrayLength} are accepted — shorten the list` };
    }
    const entries: Array<[string | number, unknown]> = array ? value.map((v: unknown, i) => [i, v]) : Object.entries(value);
    if (!array && entries.length > tomlBounds.maxTableKeys) {
      return { path, message: `has ${entries.length} keys; at most ${tomlBounds.maxTableKeys} are accepted in one table — split or shorten it` };
    }
    values += entries.length;
    if (values > tomlBounds.maxValues) {
      return { path, message: `the document holds more than ${tomlBounds.maxValues} keys and values; no definition or settings file needs that many — shorten it` };
    }
    for (const [key, inner] of entries) stack.push({ value: inner, path: [...path, key] });
  }
  return undefined;
}

function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !(value instanceof Date);
}

/**
 * Where top-level `key` is written: a `key = …` or `key.x = …` line before the first table header,
 * or a `[key…]` / `[[key…]]` header. A line scan, linear in the text, since the full key locator is
 * only safe to run on documents within bounds; 1:1 when the key cannot be found.
 */
function locateTopKey(text: string, key: string | number | undefined): { line: number; col: number } {
  if (typeof key !== "string") return { line: 1, col: 1 };
  const name = `(?:${escapeRegExp(key)}|"${escapeRegExp(key)}"|'${escapeRegExp(key)}')`;
  const header = new RegExp(`^(\\s*\\[\\[?\\s*)${name}\\s*[.\\]]`);
  const assignment = new RegExp(`^(\\s*)${name}\\s*[.=]`);
  let inTable = false;
  let start = 0;
  for (let line = 1; start <= text.length; line++) {
    const end = text.indexOf("\n", start);
    const content = text.slice(start, end === -1 ? text.length : end);
    const atHeader = header.exec(content);
    if (atHeader !== null) return { line, col: (atHeader[1] ?? "").length + 1 };
    if (/^\s*\[/.test(content)) inTable = true;
    const atKey = inTable ? null : assignment.exec(content);
    if (atKey !== null) return { line, col: (atKey[1] ?? "").length + 1 };
    if (end === -1) break;
    start = end + 1;
  }
  return { line: 1, col: 1 };
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}
