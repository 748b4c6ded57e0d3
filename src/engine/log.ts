/** Structured JSON log lines (pino) on stderr, written synchronously so the last line before an exit is never lost. */
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(nodeId: string, level = process.env.SHARD_ENGINE_LOG_LEVEL ?? "info"): Logger {
  const destination = pino.destination({ dest: 2, sync: true });
  // A line that cannot be written is lost, not the engine: stderr is a log file on the node, and a
  // full disk (ENOSPC) or a failing one (EIO) would otherwise end a process that serves. The lines
  // after it are written again once there is room.
  destination.on("error", () => undefined);
  return pino({ name: "shard-engine", level, base: { pid: process.pid, nodeId } }, destination);
}
