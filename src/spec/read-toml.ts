/** TOML text → data, or the syntax error as a SpecIssue. */
import { parse } from "smol-toml";
import { fromTomlError } from "./issues.js";
import type { SpecIssue } from "./types.js";

export type TomlResult = { ok: true; data: Record<string, unknown> } | { ok: false; issue: SpecIssue };

export function readToml(text: string, file: string): TomlResult {
  // A file saved as UTF-16 (a Windows editor's "Unicode") reads as NULs between its characters: the
  // parser would say "illegal character" at 1:1, which sends no one to the encoding.
  if (text.includes("\u0000") || text.startsWith("\uFFFD\uFFFD")) {
    return { ok: false, issue: { file, line: 1, col: 1, path: "", message: "this file is not UTF-8 (it looks like UTF-16, or holds NUL bytes): save it as UTF-8" } };
  }
  try {
    return { ok: true, data: parse(text) as Record<string, unknown> };
  } catch (error) {
    return { ok: false, issue: fromTomlError(file, error, text) };
  }
}
