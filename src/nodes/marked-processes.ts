import { commandFailed } from "./shell-node.js";
import type { NodeAccess } from "./types.js";

/**
 * The environment variable every launched engine process starts with, its value unique to that
 * process (its exit-status file). Children inherit it wherever they go: an engine that puts itself
 * in the background (a new session, its first process exiting 0) leaves the process group shardctl
 * stops, but not this mark, so what it left running can still be found and stopped.
 */
export const launchMark = "SHARDCTL_PROCESS";

/**
 * $1 = the mark's value. The pids of live processes whose environment holds exactly
 * SHARDCTL_PROCESS=$1, one per line. Linux: one grep over /proc/<pid>/environ (NUL-separated;
 * a zombie's is empty; another user's is unreadable, and an engine started as this user is never
 * another user's). Elsewhere (macOS): `ps -E` prints each process's environment after its command.
 */
const markedProcessesScript = `want="${launchMark}=$1"
if [ -d /proc/self ]; then
  grep -lzxF -e "$want" /proc/[0-9]*/environ 2>/dev/null | sed -n 's|^/proc/\\([0-9]*\\)/environ$|\\1|p'
else
  ps -A -E -ww -o pid= -o command= 2>/dev/null | awk -v want="$want" '{ for (i = 2; i <= NF; i++) if ($i == want) { print $1; break } }'
fi
exit 0`;

/**
 * The processes on `node` carrying the launch mark `value` (see launchMark). Throws when the node
 * did not answer within the deadline (default 2000 ms): an unanswered question is not "none".
 */
export async function markedProcesses(node: NodeAccess, value: string, options: { deadlineMs?: number } = {}): Promise<number[]> {
  const result = await node.run(["sh", "-c", markedProcessesScript, "sh", value], { deadlineMs: options.deadlineMs ?? 2_000 });
  if (result.exitCode !== 0) throw commandFailed(node.config.name, result.timedOut ? "NodeUnreachable" : "NodeCommandFailed", "list the processes a launch left", result);
  return result.stdout
    .split("\n")
    .filter((line) => /^\d+$/.test(line.trim()))
    .map(Number);
}
