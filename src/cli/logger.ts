import { pino, type Logger } from "pino";

/** JSON logs on stderr (stdout stays for command output); level from SHARDCTL_LOG_LEVEL, default info. */
export function createLogger(name: string): Logger {
  return pino({ name, level: process.env.SHARDCTL_LOG_LEVEL ?? "info" }, pino.destination(2));
}
