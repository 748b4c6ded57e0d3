/** TOML text → data, or the syntax error as a SpecIssue. */
import { parse } from "smol-toml";
import { fromTomlError } from "./issues.js";
import type { SpecIssue } from "./types.js";

export type TomlResult = { ok: true; data: Record<string, unknown> } | { ok: false; issue: SpecIssue };

export function readToml(text: string, file: string): TomlResult {
  try {
    return { ok: true, data: parse(text) as Record<string, unknown> };
  } catch (error) {
    return { ok: false, issue: fromTomlError(file, error, text) };
  }
}
