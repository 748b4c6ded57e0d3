/**
 * Turning what went wrong into `SpecIssue`s with file, line, column and path, and printing them as
 * `file:line:col: path: message` (the form editors and CI annotations understand).
 */
import type { z } from "zod";
import { TomlError } from "smol-toml";
import { closestName, messageOf, quoteText, showText } from "../errors/index.js";

import type { KeyPath, Locator } from "./locate.js";
import { quote } from "./patterns.js";
import { locateSyntaxError } from "./syntax-error.js";
import type { SpecIssue } from "./types.js";

/** `clusters/llama.toml:7:9: nodes[1]: unknown node "studio-3" (registered: studio-1, studio-2)`. */
export function formatIssue(issue: SpecIssue): string {
  const where = `${issue.file}:${issue.line}:${issue.col}`;
  const line = issue.path === "" ? `${where}: ${issue.message}` : `${where}: ${issue.path}: ${issue.message}`;
  // A file's name and what it holds are anyone's (a definitions directory is a git checkout): the
  // line is shown, never obeyed, and stays one line.
  return showText(line);
}

/** `nodes[1]`, `model.id`, `nodes."Studio 1".host`. */
export function formatPath(path: KeyPath): string {
  let out = "";
  for (const part of path) {
    if (typeof part === "number") out += `[${part}]`;
    else {
      const key = /^[A-Za-z0-9_-]+$/.test(part) ? part : quoteText(part);
      out += out === "" ? key : `.${key}`;
    }
  }
  return out;
}

/** An issue found by our own checks: at the value of `path` (or its key when `at` is "key"). */
export function makeIssue(file: string, locator: Locator, path: KeyPath, message: string, at: "key" | "value" = "value"): SpecIssue {
  const { line, col } = at === "key" ? locator.key(path) : locator.value(path);
  return { file, line, col, path: formatPath(path), message };
}

/** A TOML syntax error, at the construct that is wrong (smol-toml's position, corrected by `locateSyntaxError`). */
export function fromTomlError(file: string, error: unknown, text: string): SpecIssue {
  if (error instanceof TomlError) {
    const detail = error.message.replace(/^Invalid TOML document: /, "").split("\n", 1)[0] ?? "";
    const at = locateSyntaxError(text, { line: error.line, col: error.column }, detail);
    return { file, line: at.line, col: at.col, path: "", message: `invalid TOML: ${at.message}` };
  }
  return { file, line: 1, col: 1, path: "", message: `invalid TOML: ${messageOf(error)}` };
}

/**
 * Zod's issues as SpecIssues. Unknown keys become one issue each at the key; missing keys point at
 * the enclosing table; everything else at the offending value. `allowedKeys` lists the keys a table
 * accepts, for the "unknown key" message.
 */
export function fromZodIssues(file: string, locator: Locator, issues: readonly z.core.$ZodIssue[], allowedKeys: (path: KeyPath) => readonly string[]): SpecIssue[] {
  const out: SpecIssue[] = [];
  for (const issue of issues) {
    const path = issue.path as KeyPath;
    if (issue.code === "unrecognized_keys") {
      const allowed = allowedKeys(path);
      const hint = allowed.length === 0 ? "" : ` (allowed: ${allowed.join(", ")})`;
      for (const key of issue.keys) {
        const meant = closestName(key, allowed);
        const guess = meant === undefined ? "" : `; did you mean "${meant}"?`;
        out.push(makeIssue(file, locator, [...path, key], `unknown key${guess}${hint}`, "key"));
      }
    } else if (issue.code === "invalid_key") {
      out.push(makeIssue(file, locator, path, `key ${issue.issues[0]?.message ?? issue.message}`, "key"));
    } else if (issue.code === "invalid_type" && issue.message === missingMessage) {
      out.push(makeIssue(file, locator, path, issue.message, "key"));
    } else {
      out.push(makeIssue(file, locator, path, issue.message));
    }
  }
  return out;
}

/** Order issues as they appear in the file. */
export function sortIssues(issues: SpecIssue[]): SpecIssue[] {
  return issues.sort((a, b) => a.line - b.line || a.col - b.col);
}

const missingMessage = "is required";

const typeNames: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "a boolean (true or false)",
  array: "an array",
  object: "a table",
  record: "a table",
};

/** Describe a TOML value for "got …": strings quoted, numbers and booleans as written. */
export function describeValue(value: unknown): string {
  if (typeof value === "string") return quote(value);
  if (typeof value === "number" || typeof value === "boolean" || typeof value === "bigint") return String(value);
  if (Array.isArray(value)) return "an array";
  if (value instanceof Date) return "a date";
  if (value === null || value === undefined) return "nothing";
  return "a table";
}

/**
 * Messages for zod's built-in checks, in one formula: "expected X, got Y". Schema-level messages
 * (the patterns) take precedence over this map.
 */
export function describeZodIssue(issue: z.core.$ZodRawIssue): string {
  switch (issue.code) {
    case "invalid_type":
      if (issue.input === undefined) return missingMessage;
      return `expected ${typeNames[issue.expected] ?? issue.expected}, got ${describeValue(issue.input)}`;
    case "invalid_value": {
      const values = issue.values.map((v) => JSON.stringify(v));
      const expected = values.length === 1 ? values[0] : `one of ${values.join(", ")}`;
      return `expected ${expected}, got ${describeValue(issue.input)}`;
    }
    case "too_small":
    case "too_big": {
      const bound = issue.code === "too_small" ? issue.minimum : issue.maximum;
      if (issue.origin === "array") {
        const word = issue.code === "too_small" ? "at least" : "at most";
        return `expected ${word} ${bound} element${Number(bound) === 1 ? "" : "s"}, got ${(issue.input as unknown[]).length}`;
      }
      if (issue.origin === "string") {
        return `expected ${issue.code === "too_small" ? "at least" : "at most"} ${bound} characters`;
      }
      const op = issue.code === "too_small" ? (issue.inclusive === false ? ">" : ">=") : issue.inclusive === false ? "<" : "<=";
      return `expected a number ${op} ${bound}, got ${describeValue(issue.input)}`;
    }
    case "invalid_union":
      return `got ${describeValue(issue.input)}, which matches none of the allowed forms`;
    case "invalid_format":
      return `expected a valid ${issue.format}, got ${describeValue(issue.input)}`;
    default:
      return issue.message ?? `invalid value ${describeValue(issue.input)}`;
  }
}
