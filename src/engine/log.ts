/** Structured JSON log lines (pino) on stderr, written synchronously so the last line before an exit is never lost. */
import { pino, type Logger } from "pino";

export type { Logger };

export function createLogger(nodeId: string, level = process.env.SHARD_ENGINE_LOG_LEVEL ?? "info"): Logger {
  // A line that cannot be written is kept and tried again with the next (1 MiB of them at most,
  // the rest dropped), not the end of the engine: stderr is a log file on the node, and a full disk
  // (ENOSPC) or a failing one (EIO) would otherwise end a process that serves.
  const destination = pino.destination({ dest: 2, sync: true, maxLength: 1 << 20 });
  destination.on("error", () => undefined);
  return pino({ name: "shard-engine", level, base: { pid: process.pid, nodeId } }, destination);
}
