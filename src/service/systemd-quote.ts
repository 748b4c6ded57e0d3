/**
 * Writing values into a systemd unit so that systemd reads back exactly the value. Every setting
 * expands specifiers (`%h`, `%n`…), so `%` is always written `%%`. Beyond that the settings differ:
 * command lines (ExecStart=) split words at whitespace, honour double quotes with C escapes and
 * expand `$VAR`, so `$` is written `$$`; Environment= splits and unquotes the same way but expands no
 * variables; path settings (WorkingDirectory=, EnvironmentFile=) take the rest of the line as is,
 * except that surrounding whitespace is trimmed and a trailing backslash continues the line.
 */
import { ShardctlError } from "../errors/index.js";
import { checkServiceValue } from "./check-value.js";

/** Words that need no quotes: nothing in them is special to systemd's word splitting. */
const bareWord = /^[A-Za-z0-9_@+=:,./-]+$/;

function quoteWord(what: string, value: string, dollar: boolean): string {
  checkServiceValue(what, value);
  if (bareWord.test(value)) return value;
  let escaped = value.replace(/\\/g, "\\\\").replace(/"/g, '\\"').replace(/%/g, "%%");
  if (dollar) escaped = escaped.replace(/\$/g, () => "$$");
  return `"${escaped}"`;
}

/** One word of an ExecStart= command line. */
export function quoteExecWord(what: string, value: string): string {
  return quoteWord(what, value, true);
}

/** The value of an Environment= line: one `NAME=value` assignment. */
export function quoteEnvironment(name: string, value: string): string {
  return quoteWord(`the value of ${name}`, `${name}=${value}`, false);
}

/** A path setting's value (WorkingDirectory=, EnvironmentFile=) or free text (Description=). */
export function escapeSystemdLine(what: string, value: string): string {
  checkServiceValue(what, value);
  if (/^\s|\s$/.test(value) || value.endsWith("\\")) {
    throw new ShardctlError(
      "ServiceValueUnsupported",
      `${what} ${JSON.stringify(value)} begins or ends with a space or ends with a backslash: a systemd unit cannot carry it; use a path without one`,
      { terminal: true },
    );
  }
  return value.replace(/%/g, "%%");
}
