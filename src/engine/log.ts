/** Structured JSON log lines (pino) on stderr, written synchronously so the last line before an exit is never lost. */
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(nodeId: string, level = process.env.SHARD_ENGINE_LOG_LEVEL ?? "info"): Logger {
  return pino({ name: "shard-engine", level, base: { pid: process.pid, nodeId } }, pino.destination({ dest: 2, sync: true }));
}
