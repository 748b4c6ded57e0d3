/**
 * Human log lines from pino's JSON lines: `12:04:05.123 INFO  [router] router listening url=http://…`.
 *
 * Why our own formatter rather than pino-pretty: pino-pretty brings thirteen packages (its own CLI
 * parser, config-file loader, date formatter and colour library) to do what these few functions
 * do, and its colour rule is its own, where this one is Node's (see wantsColour). It sits on pino's
 * destination stream in the same thread and writes synchronously, so the line before an exit is
 * never lost.
 */
import { pino } from "pino";
import { hasUnsafeChar, quoteText, showText } from "../errors/index.js";

/** A pino destination: pino hands it one serialised JSON line per call. */
export type LineStream = { write(line: string): void };

// Keys every line carries that a person reading a terminal does not need: the time and level are
// shown up front, the message is the line, the component is a prefix; the host and the logger name
// are the same on every line of one process.
const shownElsewhere = new Set(["level", "time", "msg", "component", "name", "hostname", "v"]);

const ansi = { reset: "\u001b[0m", dim: "\u001b[2m", bold: "\u001b[1m" };
const levelColours: Record<string, string> = {
  trace: "\u001b[90m",
  debug: "\u001b[36m",
  info: "\u001b[32m",
  warn: "\u001b[33m",
  error: "\u001b[31m",
  fatal: "\u001b[35m",
};

/**
 * Whether to colour what is written to `stream`. Node's own rule, so shardctl agrees with `node`
 * itself: `FORCE_COLOR` decides when set (`0` or `false` turn colour off, anything else on, even
 * through a pipe); otherwise `NO_COLOR` set to anything but "" turns it off; otherwise only a
 * terminal that has colours (not `TERM=dumb`) gets them. FORCE_COLOR wins because it is set for
 * one command (`FORCE_COLOR=1 shardctl daemon | less -R`) where NO_COLOR usually sits in a profile.
 */
export function wantsColour(env: NodeJS.ProcessEnv, stream: { isTTY?: boolean; hasColors?: (env?: object) => boolean }): boolean {
  const force = env.FORCE_COLOR;
  if (force !== undefined) return force !== "0" && force !== "false";
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== "") return false;
  if (stream.isTTY !== true) return false;
  return stream.hasColors?.(env) ?? env.TERM !== "dumb";
}

/**
 * One JSON line as one human line (a trailing newline included); a line that is not JSON passes
 * through. What a line quotes (an engine's output, a node's error, a file's name) is shown with its
 * control characters escaped: pino's JSON escapes them, and parsing it back would let them reach
 * the terminal raw.
 */
export function formatLogLine(line: string, colour: boolean): string {
  let entry: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== "object" || parsed === null || Array.isArray(parsed)) return ensureNewline(showText(line, { keepLines: true }));
    entry = parsed as Record<string, unknown>;
  } catch {
    return ensureNewline(showText(line, { keepLines: true }));
  }
  const paint = (code: string | undefined, text: string): string => (colour && code !== undefined ? `${code}${text}${ansi.reset}` : text);

  const label = typeof entry.level === "number" ? (pino.levels.labels[entry.level] ?? String(entry.level)) : String(entry.level ?? "info");
  const parts = [paint(ansi.dim, clock(entry.time)), paint(levelColours[label], label.toUpperCase().padEnd(5))];
  if (typeof entry.component === "string") parts.push(paint(ansi.dim, `[${showText(entry.component)}]`));
  if (typeof entry.msg === "string" && entry.msg !== "") parts.push(paint(ansi.bold, showText(entry.msg, { keepLines: true })));
  for (const [key, value] of Object.entries(entry)) {
    if (shownElsewhere.has(key) || value === undefined) continue;
    // The process's own pid is on every line pino writes; another process's pid is news.
    if (key === "pid" && value === process.pid) continue;
    parts.push(`${paint(ansi.dim, `${showText(key)}=`)}${formatValue(key, value)}`);
  }
  // A multi-line message or field stays under its line, indented, so the next line is not mistaken for it.
  return `${parts.join(" ").replace(/\n/g, "\n    ")}\n`;
}

/** A pino destination that writes human lines to the file descriptor, synchronously. */
export function prettyDestination(fd: number, colour: boolean): LineStream {
  // sonic-boom (pino's own writer) retries a full pipe (EAGAIN) where a bare fs.writeSync would throw.
  const out = ignoringWriteErrors(pino.destination({ dest: fd, sync: true }));
  return { write: (line: string) => void out.write(formatLogLine(line, colour)) };
}

/**
 * A terminal destination whose write errors are dropped: after the terminal hangs up every write
 * fails (EIO), and an error without a listener would end the process in the middle of whatever it
 * logs about (a teardown). What the log file keeps is unaffected.
 */
export function ignoringWriteErrors<T extends { on(event: "error", listener: (error: Error) => void): unknown }>(stream: T): T {
  stream.on("error", () => undefined);
  return stream;
}

/** Local wall-clock time of day with milliseconds: a terminal session rarely spans days. */
function clock(time: unknown): string {
  const date = typeof time === "number" || typeof time === "string" ? new Date(time) : new Date();
  const pad = (n: number, width = 2): string => String(n).padStart(width, "0");
  return `${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)}`;
}

function formatValue(key: string, value: unknown): string {
  // pino's error serialiser gives {type, message, stack, …}: the message (and its reason) is what a
  // person acts on; the stack stays in the JSON format.
  if (key === "err" && typeof value === "object" && value !== null && typeof (value as { message?: unknown }).message === "string") {
    const error = value as { message: string; reason?: unknown };
    return quoteText(typeof error.reason === "string" ? `${error.reason}: ${error.message}` : error.message);
  }
  if (typeof value === "string") return /^[^\s"'=]+$/.test(value) && !hasUnsafeChar(value) ? value : quoteText(value);
  if (typeof value === "number" || typeof value === "boolean" || value === null) return String(value);
  return showText(JSON.stringify(value));
}

function ensureNewline(line: string): string {
  return line.endsWith("\n") ? line : `${line}\n`;
}
