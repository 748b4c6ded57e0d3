/**
 * The logs of the long-running commands (daemon, router, demo), on stderr so stdout stays for
 * command output. Human lines on a terminal, JSON lines otherwise (a service manager, a pipe, a log
 * collector); `--log-format json|pretty` forces one. Level from SHARDCTL_LOG_LEVEL, default info.
 */
import { pino, type Level, type Logger } from "pino";
import { ignoringWriteErrors, prettyDestination, wantsColour, type LineStream } from "./pretty-log.js";
import { UsageError } from "./usage-error.js";

export const logFormats = ["json", "pretty"] as const;
export type LogFormat = (typeof logFormats)[number];

/** `--log-format`, for node:util parseArgs. */
export const logFormatOption = { "log-format": { type: "string" } } as const;

// Keys that hold a secret wherever they appear in a log call (one level deep too): no code path is
// meant to log one, and this keeps a mistake from reaching a terminal, a file or a log collector.
const secretKeys = ["token", "authorization", "password", "secret", "apiKey", "api_key"];
const redactPaths = [...secretKeys, ...secretKeys.map((key) => `*.${key}`), 'headers["authorization"]', "*.headers.authorization"];

export type LoggerOptions = {
  /** Format on stderr. Default: pretty when stderr is a terminal, else json. */
  format?: LogFormat;
  /** Also write every line, as JSON, to this file (created or truncated). Default: none. */
  file?: string;
  /** The least level written to stderr when `file` is set. Default: the logger's level. */
  stderrLevel?: Level;
};

/** The `--log-format` value, checked: undefined when absent. */
export function parseLogFormat(value: string | undefined): LogFormat | undefined {
  if (value === undefined) return undefined;
  if (!(logFormats as readonly string[]).includes(value)) {
    throw new UsageError(`expected --log-format to be ${logFormats.join(" or ")}, got "${value}"`);
  }
  return value as LogFormat;
}

export function createLogger(name: string, options: LoggerOptions = {}): Logger {
  const level = process.env.SHARDCTL_LOG_LEVEL ?? "info";
  const format = options.format ?? (process.stderr.isTTY ? "pretty" : "json");
  const stderr: LineStream =
    format === "pretty" ? prettyDestination(2, wantsColour(process.env, process.stderr)) : ignoringWriteErrors(pino.destination({ dest: 2, sync: true }));
  const settings = { name, level, redact: { paths: redactPaths, censor: "[redacted]" } };
  if (options.file === undefined) return pino(settings, stderr);
  const file = pino.destination({ dest: options.file, sync: true, append: false, mkdir: true });
  return pino(
    settings,
    pino.multistream([
      { level: level as Level, stream: file },
      { level: options.stderrLevel ?? (level as Level), stream: stderr },
    ]),
  );
}
