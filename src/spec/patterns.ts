/**
 * Patterns for every string that can reach a shell, a path or a URL. They live in one place so the
 * zod schemas, the generated JSON Schemas and the messages people read all agree. Each pattern has a
 * message saying what is allowed, because "invalid" alone does not help anyone fix a file.
 */
import { z } from "zod";
import { showText } from "../errors/index.js";

/** Refuses `..` as a path segment anywhere (`../x`, `a/../b`, `a/..`). */
const noParentSegment = String.raw`(?!(?:.*/)?\.\.(?:/|$))`;

/** A path segment character: letters, digits and `. _ - + @`. No spaces, quotes or shell metacharacters. */
const pathChars = String.raw`[A-Za-z0-9._+@/-]`;

export const patterns = {
  /** Cluster and node names: DNS-label-like, so they are safe in file names, ids and URLs. */
  name: /^[a-z0-9][a-z0-9-]*$/,
  /** A Hugging Face Hub repository id, `org/name`. */
  hubRepo: new RegExp(String.raw`^${noParentSegment}[A-Za-z0-9][A-Za-z0-9._-]*/[A-Za-z0-9][A-Za-z0-9._-]*$`),
  /** A path: absolute, `~/`-relative, or relative (to the settings file's directory); no `..` segment. */
  path: new RegExp(String.raw`^${noParentSegment}(?:~/|/)?${pathChars}+$`),
  /** A model: a Hub repository id `org/name` or a path (which the same pattern covers). */
  modelId: new RegExp(String.raw`^${noParentSegment}(?:~/|/)?${pathChars}+$`),
  /** A git revision: branch, tag or 40-hex commit. */
  revision: new RegExp(String.raw`^${noParentSegment}[A-Za-z0-9][A-Za-z0-9._/-]*$`),
  /**
   * An executable: a bare command name looked up on PATH, or an absolute path. Not `~/`: a program's
   * path reaches the nodes as a quoted argument, which no shell expands (model_dir's `~/` is
   * expanded by staging itself).
   */
  binary: new RegExp(String.raw`^${noParentSegment}/?[A-Za-z0-9._+@-]${pathChars}*$`),
  /** A host: `local`, a hostname or ssh alias, an IPv4 or an IPv6 address. Never starts with `-`. */
  host: /^(?:[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?|[0-9A-Fa-f:]*:[0-9A-Fa-f:.]+)$/,
  /** A login name. */
  user: /^[A-Za-z_][A-Za-z0-9_.-]*$/,
  /** One engine argument: a flag or a value, no whitespace or shell metacharacters. */
  arg: /^(?!.*\.\.)[A-Za-z0-9_./:=,@+%-]+$/,
  /** An environment variable name. */
  envName: /^[A-Za-z_][A-Za-z0-9_]*$/,
  /** An http(s) URL without whitespace or quotes. */
  httpUrl: /^https?:\/\/[^\s"'<>\\`]+$/,
  /** `host:port` (IPv6 in brackets). */
  hostPort: /^(?:[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]):[0-9]{1,5}$/,
  /** `first-last` port range. */
  portRange: /^[0-9]{1,5}-[0-9]{1,5}$/,
  /** A size: an integer or decimal with an optional unit; plain numbers are bytes. */
  size: /^[0-9]+(?:\.[0-9]+)? ?(?:B|KB|MB|GB|TB|KiB|MiB|GiB|TiB)?$/,
  /** A declared engine version. */
  version: /^[A-Za-z0-9][A-Za-z0-9._+-]*$/,
  /** An HTTP path under a base URL: starts with '/', no '..', `{name}` where a name goes. */
  urlPath: /^\/(?!.*\.\.)[A-Za-z0-9._~/{}-]*$/,
} as const;

export type PatternName = keyof typeof patterns;

/** What each pattern allows, in words; used as the error message when a value does not match. */
export const allowed: Record<PatternName, string> = {
  name: "lowercase letters, digits and '-', starting with a letter or digit",
  hubRepo: "a Hub repository id 'org/name' (letters, digits, '.', '_', '-')",
  path: "a path of letters, digits and '. _ - + @ /' (absolute, '~/' or relative), without '..' segments",
  modelId: "a Hub repository id 'org/name' or a path of letters, digits and '. _ - + @ /' (absolute, '~/' or relative), without '..' segments",
  revision: "a branch, tag or 40-hex commit (letters, digits and '. _ - /'), without '..'",
  binary: "a command name or an absolute path of letters, digits and '. _ - + @ /', without '..' (not '~/': write the home directory out)",
  host: "\"local\", a hostname or ssh alias, or an IP address (letters, digits, '.', '-', '_'; ':' only in an IPv6 address, unbracketed; no user@ or :port, which have keys of their own)",
  user: "a login name (letters, digits, '_', '.', '-', starting with a letter or '_')",
  arg: "a single argument of letters, digits and '_ . / : = , @ + % -' (no spaces, shell metacharacters or '..')",
  envName: "an environment variable name (letters, digits and '_', not starting with a digit)",
  httpUrl: "an http:// or https:// URL",
  hostPort: "host:port, e.g. 127.0.0.1:9464",
  portRange: "a port range 'first-last', e.g. \"39600-39629\"",
  size: 'a size like "64GiB", "512MB" or a byte count (units B, KB, MB, GB, TB, KiB, MiB, GiB, TiB)',
  version: "a version of letters, digits and '. _ + -'",
  urlPath: "a path starting with '/' of letters, digits and '. _ ~ - /', with {name} where the backend's name goes, without '..'",
};

/** A string constrained by one of the patterns, with a message naming what is allowed. */
export function patternString(name: PatternName, maxLength = 1024): z.ZodString {
  return z
    .string()
    .max(maxLength, { error: `must be at most ${maxLength} characters` })
    .regex(patterns[name], { error: (issue) => `${quote(issue.input)} is not allowed: expected ${allowed[name]}` });
}

/**
 * JSON-quote a value for a message, shortened so a pasted blob does not flood the terminal, with
 * the control and bidi characters JSON leaves raw escaped too (messages reach terminals).
 */
export function quote(value: unknown): string {
  const text = showText(JSON.stringify(value) ?? String(value));
  // Not cut inside an escape: a dangling "\u00" would make the rest of the line unreadable.
  return text.length > 80 ? `${text.slice(0, 77).replace(/\\u?[0-9a-f]{0,3}$/, "")}..."` : text;
}
