/**
 * Edits the `backends:` list of a continuum-router YAML file. The edit is made on a `yaml` Document
 * (the semantic truth), then spliced into the original text entry by entry, so every byte outside the
 * entries that changed — comments, spacing, quoting, key order, other backends — stays as written.
 * When a layout is too unusual to splice (a flow-style list with entries, say), the whole Document is
 * re-serialised instead; comments survive that too, only spacing may be normalised.
 */
import { isDeepStrictEqual } from "node:util";
import { Document, isMap, isPair, isScalar, isSeq, parseDocument, YAMLMap, YAMLSeq, type Node } from "yaml";
import type { BackendEntry } from "./types.js";

/** What a config file starts as when shardctl is the first to write it. */
export const NEW_CONFIG_TEXT = `# continuum-router configuration.
# shardctl adds and removes entries of \`backends:\`; everything else in this file is left as written.
backends: []
`;

// New entries look like continuum-router's documented example: name: "x", models: ["a"].
const RENDER_OPTIONS = { defaultStringType: "QUOTE_DOUBLE", defaultKeyType: "PLAIN", flowCollectionPadding: false, lineWidth: 0 } as const;

/** Parses `text`, throwing the first YAML error. */
export function parseConfigDocument(text: string): Document {
  const doc = parseDocument(text);
  const first = doc.errors[0];
  if (first !== undefined) throw new Error(first.message);
  return doc;
}

/** Returns `text` with `change` applied to its backends list; the same string when nothing changed. */
export function editBackendsText(text: string, change: (doc: Document) => void): string {
  const original = parseConfigDocument(text);
  const edited = original.clone();
  change(edited);
  const expected: unknown = edited.toJS();
  if (isDeepStrictEqual(expected, original.toJS())) return text;
  const whole = edited.toString(RENDER_OPTIONS);
  let spliced: string | undefined;
  try {
    spliced = spliceBackends(text, original, edited);
  } catch {
    spliced = undefined;
  }
  // Trust the splice only if it means exactly what the Document edit means.
  if (spliced !== undefined && isDeepStrictEqual(parseDocument(spliced).toJS(), expected)) return spliced;
  return whole;
}

/** Adds `entry`, or updates the same-named entry in place (its other keys and comments are kept). */
export function upsertBackend(doc: Document, entry: BackendEntry): void {
  const backends = ensureBackendsSeq(doc);
  const existing = backends.items.find((item) => isMap(item) && item.get("name") === entry.name);
  if (isMap(existing)) {
    setEntryFields(doc, existing, entry);
    return;
  }
  const map = new YAMLMap<unknown, unknown>();
  setEntryFields(doc, map, entry);
  backends.flow = false;
  backends.items.push(map);
}

/** Removes every entry named `name`; returns whether anything was removed. */
export function removeBackend(doc: Document, name: string): boolean {
  const backends = doc.get("backends", true);
  if (!isSeq(backends)) return false;
  const before = backends.items.length;
  backends.items = backends.items.filter((item) => !(isMap(item) && item.get("name") === name));
  return backends.items.length !== before;
}

function ensureBackendsSeq(doc: Document): YAMLSeq {
  if (doc.contents === null || (isScalar(doc.contents) && doc.contents.value === null)) {
    doc.contents = new YAMLMap() as unknown as typeof doc.contents;
  }
  if (!isMap(doc.contents)) throw new Error("the document's top level is not a mapping");
  const current = doc.get("backends", true);
  if (isSeq(current)) return current;
  if (current !== undefined && current !== null && !(isScalar(current) && current.value === null)) {
    throw new Error("`backends` is not a list");
  }
  const seq = new YAMLSeq();
  doc.set("backends", seq);
  return seq;
}

// Keys in continuum-router's documented order: name, url, weight, models; then shardctl's upstream_model.
function setEntryFields(doc: Document, map: YAMLMap<unknown, unknown>, entry: BackendEntry): void {
  map.set("name", entry.name);
  map.set("url", entry.url);
  if (entry.weight === undefined) map.delete("weight");
  else map.set("weight", entry.weight);
  const models = doc.createNode([...entry.models]) as Node;
  if (isSeq(models)) models.flow = true;
  map.set("models", models);
  if (entry.upstream_model === undefined) map.delete("upstream_model");
  else map.set("upstream_model", entry.upstream_model);
}

type Edit = { from: number; to: number; insert: string };

// Splices the edited list into the original text. Throws when the layout is not one it handles.
function spliceBackends(text: string, original: Document, edited: Document): string {
  const next = edited.get("backends", true);
  if (!isSeq(next)) throw new Error("no backends list after the edit");
  const root = original.contents;
  const pair = isMap(root) ? root.items.find((item) => isPair(item) && isScalar(item.key) && item.key.value === "backends") : undefined;

  // No `backends:` key yet: append one at the end of the file.
  if (pair === undefined) {
    if (!(root === null || isMap(root))) throw new Error("top level is not a mapping");
    const prefix = text.length === 0 || text.endsWith("\n") ? text : `${text}\n`;
    return `${prefix}backends:${renderBlock(next.items, 2)}\n`;
  }
  const key = pair.key as Node;
  if (key.range === undefined || key.range === null) throw new Error("key without a source range");
  const colon = text.indexOf(":", key.range[1]);
  const keyColumn = key.range[0] - lineStart(text, key.range[0]);
  const value = pair.value as Node | null;

  // A block list with entries: edit entry by entry.
  if (isSeq(value) && !value.flow && value.items.length > 0) {
    const spans = value.items.map((item) => spanOf(text, item as Node));
    const kept = new Map<string, Node>();
    for (const item of next.items) if (isMap(item)) kept.set(String(item.get("name")), item);
    const edits: Edit[] = [];
    const oldNames = new Set<string>();
    let lastKept: (typeof spans)[number] | undefined;
    for (const [index, item] of value.items.entries()) {
      const span = spans[index];
      if (span === undefined || !isMap(item)) throw new Error("a backends entry that is not a mapping");
      const name = String(item.get("name"));
      oldNames.add(name);
      const replacement = kept.get(name);
      if (replacement === undefined) {
        edits.push({ from: span.start, to: Math.min(span.end + 1, text.length), insert: "" });
        continue;
      }
      lastKept = span;
      if (!isDeepStrictEqual((replacement as YAMLMap).toJSON(), item.toJSON())) {
        edits.push(...editEntryFields(text, item, replacement as YAMLMap));
      }
    }
    const added = next.items.filter((item) => !(isMap(item) && oldNames.has(String(item.get("name")))));
    const column = spans[0]?.column ?? keyColumn + 2;
    if (lastKept !== undefined) {
      if (added.length > 0) edits.push({ from: lastKept.end, to: lastKept.end, insert: renderBlock(added, column) });
    } else {
      // Every old entry went: rewrite the whole value, `[]` when empty.
      const end = spans[spans.length - 1]?.end ?? colon + 1;
      // Keep a comment on the `backends:` line itself.
      const keyLineEnd = text.indexOf("\n", colon);
      const rest = keyLineEnd === -1 ? "" : text.slice(colon + 1, keyLineEnd);
      const comment = /^\s*#/.test(rest) ? rest : "";
      edits.length = 0;
      edits.push({ from: colon + 1, to: end, insert: added.length === 0 ? ` []${comment}` : `${comment}${renderBlock(added, column)}` });
    }
    return applyEdits(text, edits);
  }

  // Empty, null or flow-style value: replace it with a block list (or `[]`).
  if (value !== null && !isSeq(value) && !(isScalar(value) && value.value === null)) throw new Error("backends is not a list");
  const end = value?.range?.[1] ?? colon + 1;
  if (end < colon + 1 || text.slice(colon + 1, end).includes("\n")) throw new Error("unexpected value layout");
  const insert = next.items.length === 0 ? " []" : renderBlock(next.items, keyColumn + 2);
  return applyEdits(text, [{ from: colon + 1, to: end, insert }]);
}

// Changes only the values of an entry's fields that differ, so its other keys, comments and spacing stay.
function editEntryFields(text: string, before: YAMLMap, after: YAMLMap): Edit[] {
  const edits: Edit[] = [];
  const pairs = before.items;
  const firstKey = pairs[0]?.key as Node | undefined;
  if (firstKey?.range === undefined || firstKey.range === null) throw new Error("entry without a source range");
  const column = firstKey.range[0] - lineStart(text, firstKey.range[0]);
  let lastContent = firstKey.range[1];
  for (const pair of pairs) {
    const value = pair.value as Node | null;
    if (value?.range) lastContent = Math.max(lastContent, contentEnd(text, value.range[0], value.range[1]));
  }
  for (const field of ["name", "url", "weight", "models", "upstream_model"]) {
    const pair = pairs.find((item) => isScalar(item.key) && item.key.value === field);
    const wanted: unknown = after.toJSON()[field];
    if (pair === undefined) {
      if (wanted !== undefined)
        edits.push({ from: lineEndAt(text, lastContent), to: lineEndAt(text, lastContent), insert: `\n${" ".repeat(column)}${field}: ${renderFlow(wanted)}` });
      continue;
    }
    const value = pair.value as Node | null;
    const had: unknown = value === null ? null : (value as unknown as { toJSON(): unknown }).toJSON();
    if (isDeepStrictEqual(had, wanted)) continue;
    if (wanted === undefined) {
      const key = pair.key as Node;
      if (key.range === undefined || key.range === null || key === firstKey) throw new Error("cannot remove the first key");
      const end = value?.range ? contentEnd(text, value.range[0], value.range[1]) : key.range[1];
      edits.push({ from: lineStart(text, key.range[0]), to: Math.min(lineEndAt(text, end) + 1, text.length), insert: "" });
      continue;
    }
    if (value?.range === undefined || value.range === null) throw new Error("value without a source range");
    edits.push({ from: value.range[0], to: contentEnd(text, value.range[0], value.range[1]), insert: renderFlow(wanted) });
  }
  return edits;
}

// One-line YAML for a field value: strings double-quoted (JSON escapes are valid YAML), lists in flow style.
function renderFlow(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => renderFlow(item)).join(", ")}]`;
  return typeof value === "string" ? JSON.stringify(value) : String(value);
}

// Offset just past the last non-blank character of [from, to).
function contentEnd(text: string, from: number, to: number): number {
  let end = to;
  while (end > from && /\s/.test(text[end - 1] ?? "")) end -= 1;
  return end;
}

function lineEndAt(text: string, offset: number): number {
  const newline = text.indexOf("\n", Math.max(0, offset - 1));
  return newline === -1 ? text.length : newline;
}

// An entry's text: from the start of its `- ` line to the end of its last content line.
function spanOf(text: string, item: Node): { start: number; end: number; column: number } {
  if (item.range === undefined || item.range === null) throw new Error("entry without a source range");
  const first = lineStart(text, item.range[0]);
  const dash = text.lastIndexOf("-", item.range[0]);
  if (dash < first) throw new Error("entry does not start on a `- ` line");
  let last = item.range[1] - 1;
  while (last > item.range[0] && /\s/.test(text[last] ?? "")) last -= 1;
  const newline = text.indexOf("\n", last);
  return { start: first, end: newline === -1 ? text.length : newline, column: dash - first };
}

// Renders entries as block-list lines at `column`, each line preceded by "\n".
function renderBlock(items: unknown[], column: number): string {
  const doc = new Document();
  const seq = new YAMLSeq();
  seq.items = items;
  doc.contents = seq as unknown as typeof doc.contents;
  const pad = " ".repeat(column);
  return doc
    .toString(RENDER_OPTIONS)
    .replace(/\n+$/, "")
    .split("\n")
    .map((line) => (line.length === 0 ? "" : `\n${pad}${line}`))
    .join("");
}

function lineStart(text: string, offset: number): number {
  return text.lastIndexOf("\n", offset - 1) + 1;
}

function applyEdits(text: string, edits: Edit[]): string {
  let result = text;
  for (const edit of [...edits].sort((a, b) => b.from - a.from)) {
    result = result.slice(0, edit.from) + edit.insert + result.slice(edit.to);
  }
  return result;
}
