/**
 * Where each key and value of a TOML document is, so an issue found by the schema (which only knows
 * paths like `nodes[1]`) can name a line and column. This is a scanner, not a parser: it runs only on
 * text smol-toml has already accepted, and it records positions of table headers, `key = value`
 * lines (dotted and quoted keys), array-of-tables entries and the elements of inline arrays and
 * inline tables.
 */

export type KeyPath = readonly (string | number)[];

export interface Position {
  /** 1-based. */
  line: number;
  /** 1-based. */
  col: number;
}

export interface Locator {
  /** Where the key (or table header) of `path` is, or the nearest enclosing table's; 1:1 at worst. */
  key(path: KeyPath): Position;
  /** Where the value of `path` starts, falling back to `key(path)`. */
  value(path: KeyPath): Position;
}

const bareKeyChar = /[A-Za-z0-9_-]/;

/** Scan `text` (valid TOML) and return a locator of its keys and values. */
export function locateKeys(text: string): Locator {
  const keys = new Map<string, number>();
  const values = new Map<string, number>();
  const tableCounts = new Map<string, number>();
  let i = 0;

  const id = (path: KeyPath): string => JSON.stringify(path);
  const remember = (map: Map<string, number>, path: KeyPath, at: number): void => {
    if (!map.has(id(path))) map.set(id(path), at);
  };
  const skipSpace = (): void => {
    while (text[i] === " " || text[i] === "\t") i++;
  };
  // Whitespace, newlines and comments, as allowed inside arrays.
  const skipBlank = (): void => {
    for (;;) {
      skipSpace();
      if (text[i] === "\r" || text[i] === "\n") i++;
      else if (text[i] === "#") while (i < text.length && text[i] !== "\n") i++;
      else return;
    }
  };
  const readString = (quoteChar: string): string => {
    const multi = text.startsWith(quoteChar.repeat(3), i);
    const close = multi ? quoteChar.repeat(3) : quoteChar;
    i += close.length;
    let out = "";
    while (i < text.length && !text.startsWith(close, i)) {
      if (quoteChar === '"' && text[i] === "\\") {
        out += text.slice(i, i + 2);
        i += 2;
      } else out += text[i++];
    }
    i += close.length;
    // A multi-line string may end with up to two extra quotes that belong to its content.
    while (multi && text[i] === quoteChar) i++;
    return quoteChar === '"' ? decodeBasic(out) : out;
  };
  // A dotted key: its parts and where each part starts.
  const readKey = (): { parts: string[]; starts: number[] } => {
    const parts: string[] = [];
    const starts: number[] = [];
    for (;;) {
      skipSpace();
      starts.push(i);
      if (text[i] === '"' || text[i] === "'") parts.push(readString(text[i] as string));
      else {
        const start = i;
        while (i < text.length && bareKeyChar.test(text[i] as string)) i++;
        parts.push(text.slice(start, i));
      }
      skipSpace();
      if (text[i] !== ".") return { parts, starts };
      i++;
    }
  };

  const readValue = (path: KeyPath): void => {
    remember(values, path, i);
    const c = text[i];
    if (c === '"' || c === "'") readString(c);
    else if (c === "[") {
      i++;
      for (let index = 0; ; index++) {
        skipBlank();
        if (text[i] === "]" || i >= text.length) break;
        remember(keys, [...path, index], i);
        readValue([...path, index]);
        skipBlank();
        if (text[i] === ",") i++;
      }
      i++;
    } else if (c === "{") {
      i++;
      for (;;) {
        skipSpace();
        if (text[i] === "}" || i >= text.length) break;
        readKeyValue(path);
        skipSpace();
        if (text[i] === ",") i++;
      }
      i++;
    } else {
      while (i < text.length && !",]}\r\n#".includes(text[i] as string)) i++;
    }
  };
  const readKeyValue = (table: KeyPath): void => {
    const { parts, starts } = readKey();
    parts.forEach((_, k) => remember(keys, [...table, ...parts.slice(0, k + 1)], starts[k] ?? i));
    skipSpace();
    if (text[i] === "=") i++;
    skipSpace();
    readValue([...table, ...parts]);
  };

  let table: KeyPath = [];
  while (i < text.length) {
    skipBlank();
    if (i >= text.length) break;
    const start = i;
    if (text.startsWith("[[", i)) {
      i += 2;
      const { parts } = readKey();
      const count = tableCounts.get(id(parts)) ?? 0;
      tableCounts.set(id(parts), count + 1);
      table = [...parts, count];
      parts.forEach((_, k) => remember(keys, parts.slice(0, k + 1), start));
      remember(keys, table, start);
      i += 2;
    } else if (text[i] === "[") {
      i++;
      const { parts } = readKey();
      table = parts;
      parts.forEach((_, k) => remember(keys, parts.slice(0, k + 1), start));
      i++;
    } else {
      readKeyValue(table);
    }
    // Anything left on the line is a comment.
    while (i < text.length && text[i] !== "\n") i++;
  }

  const lineStarts = [0];
  for (let k = 0; k < text.length; k++) if (text[k] === "\n") lineStarts.push(k + 1);
  const toPosition = (offset: number): Position => {
    let lo = 0;
    let hi = lineStarts.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if ((lineStarts[mid] as number) <= offset) lo = mid;
      else hi = mid - 1;
    }
    return { line: lo + 1, col: offset - (lineStarts[lo] as number) + 1 };
  };
  const key = (path: KeyPath): Position => {
    for (let n = path.length; n > 0; n--) {
      const at = keys.get(id(path.slice(0, n)));
      if (at !== undefined) return toPosition(at);
    }
    return { line: 1, col: 1 };
  };
  return {
    key,
    value: (path) => {
      const at = values.get(id(path));
      return at === undefined ? key(path) : toPosition(at);
    },
  };
}

/** Decode the escapes of a TOML basic string (keys only need to compare equal to smol-toml's). */
function decodeBasic(raw: string): string {
  return raw.replace(/\\(u[0-9A-Fa-f]{4}|U[0-9A-Fa-f]{8}|.)/g, (_, e: string) => {
    if (e.length > 1) return String.fromCodePoint(parseInt(e.slice(1), 16));
    return ({ b: "\b", t: "\t", n: "\n", f: "\f", r: "\r", '"': '"', "\\": "\\" } as Record<string, string>)[e] ?? e;
  });
}
