/**
 * JSON from the daemon, every string in it made safe to show: a status carries text nobody on our
 * side wrote (an engine's log lines, its error output quoted in a message), and the browser acts on
 * some of it as a terminal would: a bidirectional override (U+202E) reorders the rest of its line, so
 * "gpj.exe" reads "exe.jpg", and ANSI escapes show as stray "[31m". Each such character is shown as
 * its `\u` escape, as `shardctl status` prints it; markup needs nothing here (the page renders text,
 * never HTML). Newlines and tabs stay: log tails and messages keep their lines.
 */
import { showText } from "../../errors/index.js";

export function parseShown<T>(text: string): T {
  return JSON.parse(text, (_key, value: unknown) => (typeof value === "string" ? showText(value, { keepLines: true }) : value)) as T;
}
