/**
 * Where a TOML syntax error really is. smol-toml stops where it can no longer go on, which is often
 * not where the mistake was made: an array left open is reported at the next table header, two
 * lines further down, and a string left open at the end of its line. This rescans the text up to
 * that point and names the construct that is wrong instead — the `[` or `{` never closed, the quote
 * never matched, the backslash of a bad escape, the key not followed by `=` — keeping smol-toml's
 * position and words for everything else.
 */
import type { Position } from "./locate.js";

export interface SyntaxErrorAt extends Position {
  /** What is wrong, for people (without the "invalid TOML: " prefix). */
  message: string;
}

/** An opening bracket of a value (array or inline table), where it is. */
interface Opener {
  char: "[" | "{";
  offset: number;
}

/** What the text holds before the error: the brackets still open and a string left open, if any. */
interface Scan {
  open: Opener[];
  /** A single-line string whose line ended before its closing quote. */
  unclosedString?: number;
}

/** Re-locate smol-toml's error (1-based line and column, its message's first line). */
export function locateSyntaxError(text: string, at: Position, detail: string): SyntaxErrorAt {
  const offsets = lineOffsets(text);
  const offset = Math.min(text.length, (offsets[at.line - 1] ?? text.length) + at.col - 1);
  const position = (o: number): Position => positionOf(offsets, o);
  const scan = scanUpTo(text, offset);

  // A merge that stopped on a conflict leaves git's markers in the file: none is TOML, and the
  // error smol-toml gives for one ("illegal character in key") says nothing of what happened.
  // Only from a `<<<<<<<` line on: a line of `=======` alone may be a heading's underline in a string.
  const marker = /^<{7}(?: |$)/m.exec(text);
  if (marker !== null && marker.index <= offset) {
    return { ...position(marker.index), message: `a merge conflict is left in the file (git's "<<<<<<<" marker): keep one side, remove the markers, and commit` };
  }
  if (scan.unclosedString !== undefined) {
    return { ...position(scan.unclosedString), message: `unclosed string: no closing quote before the end of the line` };
  }
  // smol-toml points at the opening quotes of a multi-line string it found no end for: right place.
  if (detail === "unfinished string") return { ...at, message: "unclosed multi-line string: no closing quotes before the end of the file" };
  if (detail === "expected comma or end of structure") {
    const top = scan.open.at(-1);
    if (top !== undefined && leftOpen(text, offset, top)) {
      return {
        ...position(top.offset),
        message: top.char === "[" ? `unclosed array: this "[" has no matching "]"` : `unclosed inline table: this "{" has no matching "}"`,
      };
    }
    if (top !== undefined) return { ...at, message: `expected "," or "${top.char === "[" ? "]" : "}"}" before this` };
  }
  if (detail === "unrecognised escape sequence" || detail.includes("unicode escape")) {
    const backslash = text.lastIndexOf("\\", offset);
    const sameLine = backslash >= (offsets[at.line - 1] ?? 0);
    if (backslash >= 0 && sameLine) {
      const length = text[backslash + 1] === "u" ? 6 : text[backslash + 1] === "U" ? 10 : 2;
      const sequence = text.slice(backslash, backslash + length).split("\n")[0];
      return { ...position(backslash), message: `${detail} ${sequence} (write \\\\ for a backslash, or use a 'literal string')` };
    }
  }
  if (detail === "illegal character in key") {
    const lineStart = offsets[at.line - 1] ?? 0;
    const before = text.slice(lineStart, offset);
    const header = /^\s*(\[\[?)/.exec(before);
    if (header !== null) {
      const bracket = lineStart + before.indexOf("[");
      return { ...position(bracket), message: `unclosed table header: expected "${header[1] === "[[" ? "]]" : "]"}" after the table name` };
    }
    // A key, then blanks (or the end of the line), then not "=": the "=" is missing, not the key wrong.
    const key = /([^\s{},=]+)(\s*)$/.exec(before);
    const next = text[offset];
    if (key !== null && key[1] !== "" && (key[2] !== "" || next === undefined || next === "\n" || next === "\r")) {
      const name = key[1]!;
      return { ...at, message: `expected "=" after the key ${/^["']/.test(name) ? name : `"${name}"`}` };
    }
  }
  return { ...at, message: detail };
}

/**
 * Whether the error shows that `top` was never closed (rather than a comma missing inside it): the
 * parser met the end of the document, the closing bracket of an enclosing structure, or — after a
 * line break — the start of a new statement (a table header or `key =`), or, for an inline table,
 * anything on a later line.
 */
function leftOpen(text: string, offset: number, top: Opener): boolean {
  const rest = text.slice(offset);
  if (rest.trim() === "") return true;
  const closer = top.char === "[" ? "]" : "}";
  if ((rest[0] === "]" || rest[0] === "}") && rest[0] !== closer) return true;
  const newLine = text.slice(top.offset, offset).includes("\n");
  if (!newLine) return false;
  if (top.char === "{") return true;
  const statement = /^(\[\[?\s*[A-Za-z_"'][^\]\n]*\]\]?[ \t]*(#.*)?(\r?\n|$)|[A-Za-z0-9_-]+(\s*\.\s*[A-Za-z0-9_-]+)*\s*=|"[^"\n]*"\s*=)/;
  return statement.test(rest);
}

/**
 * Scan `text` up to `end`, skipping comments and strings: the value brackets still open there, and
 * a single-line string that its line ended inside. A `[` that starts a line outside any value is a
 * table header, not an array.
 */
function scanUpTo(text: string, end: number): Scan {
  const open: Opener[] = [];
  let lineStart = true;
  let i = 0;
  while (i < end) {
    const c = text[i]!;
    if (c === "\n") {
      lineStart = true;
      i++;
      continue;
    }
    if (c === " " || c === "\t" || c === "\r") {
      i++;
      continue;
    }
    const startsLine = lineStart;
    lineStart = false;
    if (c === "#") {
      while (i < text.length && text[i] !== "\n") i++;
    } else if (c === '"' || c === "'") {
      const closedAt = skipString(text, i);
      if (closedAt === undefined) return { open, unclosedString: i };
      i = closedAt;
    } else if (c === "[" && startsLine && open.length === 0) {
      // A table header: its name may be quoted, so it is skipped like a key.
      while (i < end && text[i] !== "\n" && text[i] !== "]") i = text[i] === '"' || text[i] === "'" ? (skipString(text, i) ?? end) : i + 1;
      while (text[i] === "]") i++;
    } else if (c === "[" || c === "{") {
      open.push({ char: c, offset: i });
      i++;
    } else if (c === "]" || c === "}") {
      open.pop();
      i++;
    } else {
      i++;
    }
  }
  return { open };
}

/** The offset after the string starting at `start`; undefined when a single-line string meets its line's end. */
function skipString(text: string, start: number): number | undefined {
  const quote = text[start]!;
  const multi = text.startsWith(quote.repeat(3), start);
  if (multi) {
    const close = text.indexOf(quote.repeat(3), start + 3);
    // An unfinished multi-line string: smol-toml already points at its opening quotes.
    if (close < 0) return text.length;
    let after = close + 3;
    while (text[after] === quote) after++;
    return after;
  }
  for (let i = start + 1; i < text.length; i++) {
    const c = text[i];
    if (c === "\n" || c === "\r") return undefined;
    if (quote === '"' && c === "\\") i++;
    else if (c === quote) return i + 1;
  }
  return undefined;
}

function lineOffsets(text: string): number[] {
  const starts = [0];
  for (let i = 0; i < text.length; i++) if (text[i] === "\n") starts.push(i + 1);
  return starts;
}

function positionOf(starts: readonly number[], offset: number): Position {
  let line = 0;
  while (line + 1 < starts.length && starts[line + 1]! <= offset) line++;
  return { line: line + 1, col: offset - starts[line]! + 1 };
}
