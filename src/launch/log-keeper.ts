/**
 * Engine logs are appended to for as long as their processes run: an engine that logs every request
 * fills its disk in weeks, one that floods in minutes. While a cluster is supervised each of its logs
 * is looked at every 30 s; past 64 MiB its last 8 MiB are kept in `<log>.1` (replacing the last one)
 * and the log is emptied. The engines write with O_APPEND (the start script's `>>`), so emptying the
 * file under them is safe: their next line lands at its start. On a full disk the copy fails and the
 * log is emptied all the same: the space is what matters then. A look that had to empty a log comes
 * back four times sooner (down to a 15th of the interval, 2 s by default), a quiet one twice as late
 * (up to the interval): an engine that floods its log (64 MiB in under 30 s) is kept near the limit,
 * not 30 s of flood past it. The first look comes at that 15th too (then 4, 8, 16, 30 s while
 * quiet): an engine that floods from its start (50 MiB/s grew a log to 1.6 GB by a first look at
 * 30 s) is caught then. A launch keeps its logs so from its first process on (a model may load for
 * many minutes while its engine logs), and the supervision of what it started from then on.
 *
 * A look that does not finish within its deadline (10 s) has met a node whose disk hangs (or one
 * out of reach): what it ran may stay stuck there, so that node is not looked at again for a
 * while — a minute, doubling while it stays so, up to ten — instead of piling a stuck command on
 * it at every look.
 */
import type { NodeAccess } from "../nodes/index.js";
import type { LedgerEntry } from "./ledger.js";

export interface LogLimits {
  /** Between two looks at a node's logs, ms. Default 30 000. */
  intervalMs: number;
  /** A log past this many bytes is emptied. Default 64 MiB. */
  limitBytes: number;
  /** Its last bytes kept in `<log>.1`. Default 8 MiB. */
  keepBytes: number;
  /** How long one look at a node may take, ms. Default 10 000. */
  lookDeadlineMs?: number;
  /** How long a node whose look did not finish is left alone first, ms (then doubled, up to 10×). Default 60 000. */
  unansweredPauseMs?: number;
}

export const defaultLogLimits: LogLimits = { intervalMs: 30_000, limitBytes: 64 * 1024 * 1024, keepBytes: 8 * 1024 * 1024 };

/** $1 = limit, $2 = bytes kept, then the logs. Prints `<log> <size>` for each one emptied. */
const trimScript = `limit=$1; keep=$2; shift 2
for f; do
  [ -f "$f" ] || continue
  s=$(wc -c < "$f" 2>/dev/null) || continue
  s=$((s + 0))
  [ "$s" -gt "$limit" ] || continue
  tail -c "$keep" "$f" > "$f.1.tmp" 2>/dev/null && mv -f "$f.1.tmp" "$f.1" || rm -f "$f.1.tmp"
  : > "$f"
  echo "$f $s"
done
exit 0`;

/**
 * Empty the logs among `files` past the limit on `node`, keeping their ends; the ones emptied, with
 * the size they had. Undefined when the look did not finish within its deadline.
 */
export async function trimLogs(
  node: NodeAccess,
  files: readonly string[],
  limits: Pick<LogLimits, "limitBytes" | "keepBytes" | "lookDeadlineMs">,
): Promise<Array<{ file: string; bytes: number }> | undefined> {
  if (files.length === 0) return [];
  const argv = ["sh", "-c", trimScript, "sh", String(limits.limitBytes), String(limits.keepBytes), ...files];
  const result = await node.run(argv, { deadlineMs: limits.lookDeadlineMs ?? 10_000 });
  if (result.timedOut) return undefined;
  if (result.exitCode !== 0) return [];
  return result.stdout
    .split("\n")
    .map((line) => /^(.*) (\d+)$/.exec(line))
    .filter((m): m is RegExpExecArray => m !== null)
    .map(([, file, bytes]) => ({ file: file!, bytes: Number(bytes) }));
}

/**
 * Look at the entry's logs, node by node, every `intervalMs` until stopped; `onTrimmed` hears each
 * one emptied. The entry's processes are read at each look: a launch under way adds them as it
 * starts them (a log not written yet is passed over).
 */
export function keepLogsBounded(
  entry: Pick<LedgerEntry, "processes">,
  nodeFor: (name: string) => NodeAccess,
  limits: LogLimits = defaultLogLimits,
  onTrimmed?: (node: string, file: string, bytes: number) => void,
): { stop(): Promise<void> } {
  const logsByNode = (): Map<string, string[]> => {
    const byNode = new Map<string, string[]>();
    for (const p of entry.processes) byNode.set(p.node, [...(byNode.get(p.node) ?? []), p.logFile]);
    return byNode;
  };
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let running: Promise<void> = Promise.resolve();
  const soonestMs = limits.intervalMs / 15;
  let intervalMs = soonestMs;
  const firstPauseMs = limits.unansweredPauseMs ?? 60_000;
  /** Per node whose last look did not finish: when to look again (monotonic ms), and the pause that led there. */
  const paused = new Map<string, { untilMs: number; pauseMs: number }>();
  /** True when a log had to be emptied. */
  const look = async (): Promise<boolean> => {
    const trimmed = await Promise.all(
      [...logsByNode()].map(async ([name, files]) => {
        const pause = paused.get(name);
        if (pause !== undefined && performance.now() < pause.untilMs) return false;
        // A node that does not answer at all is judged by the health monitor; here it is only left alone a while.
        const trimmed = await trimLogs(nodeFor(name), files, limits).catch(() => []);
        if (trimmed === undefined) {
          const pauseMs = pause === undefined ? firstPauseMs : Math.min(pause.pauseMs * 2, firstPauseMs * 10);
          paused.set(name, { untilMs: performance.now() + pauseMs, pauseMs });
          return false;
        }
        paused.delete(name);
        for (const { file, bytes } of trimmed) onTrimmed?.(name, file, bytes);
        return trimmed.length > 0;
      }),
    );
    return trimmed.includes(true);
  };
  const schedule = (): void => {
    if (stopped) return;
    timer = setTimeout(() => {
      running = look()
        .then((flooded) => void (intervalMs = flooded ? Math.max(soonestMs, intervalMs / 4) : Math.min(limits.intervalMs, intervalMs * 2)))
        .finally(schedule);
    }, intervalMs);
    timer.unref();
  };
  schedule();
  return {
    async stop() {
      stopped = true;
      clearTimeout(timer);
      await running;
    },
  };
}
