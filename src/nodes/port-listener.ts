/**
 * Who listens on a TCP port of a node: the pid, its command line and (Linux) its working directory,
 * from `ss -tlnp` (Linux) or `lsof` (macOS, elsewhere). "Stop what holds it" is no advice without
 * saying what that is; and a holder whose command or folder is a cluster's own run directory is what
 * an earlier launch of that cluster left behind (an engine that detached itself with a clean
 * environment, beyond the mark supervision finds its strays by).
 */
import type { NodeAccess } from "./types.js";

/** $1 = port. Prints the holder's pid, then its command line, then `cwd=<dir>` where the node tells it; nothing when unknown. */
const portHolderScript = `port=$1
pid=
if command -v ss >/dev/null 2>&1; then pid=$(ss -Htlnp "sport = :$port" 2>/dev/null | sed -n 's/.*pid=\\([0-9][0-9]*\\).*/\\1/p' | head -n 1); fi
if [ -z "$pid" ] && command -v lsof >/dev/null 2>&1; then pid=$(lsof -nP -t -iTCP:"$port" -sTCP:LISTEN 2>/dev/null | head -n 1); fi
[ -n "$pid" ] || exit 0
echo "$pid"
ps -ww -o args= -p "$pid"
cwd=$(readlink "/proc/$pid/cwd" 2>/dev/null) && echo "cwd=$cwd"
exit 0`;

export interface PortListener {
  pid: number;
  /** Its command line, as `ps` shows it ("" when it ended meanwhile). */
  command: string;
  /** Its working directory, where the node says (Linux). */
  cwd?: string;
}

/** The process listening on `port` at `node`, or undefined when none is found (or the node does not say in time). */
export async function findPortListener(node: NodeAccess, port: number, options: { deadlineMs?: number } = {}): Promise<PortListener | undefined> {
  const result = await node.run(["sh", "-c", portHolderScript, "sh", String(port)], { deadlineMs: options.deadlineMs ?? 2_000 }).catch(() => undefined);
  if (result === undefined || result.exitCode !== 0) return undefined;
  const [pidLine = "", command = "", ...rest] = result.stdout.split("\n");
  const pid = Number(pidLine.trim());
  if (!/^\d+$/.test(pidLine.trim()) || pid <= 0) return undefined;
  const cwd = rest.find((line) => line.startsWith("cwd="))?.slice("cwd=".length);
  return { pid, command: command.trim(), ...(cwd === undefined || cwd === "" ? {} : { cwd }) };
}

/** Whether `holder` runs from, or names, the run directory `runDir`: a process a launch from there started. */
export function isFromRunDir(holder: PortListener, runDir: string): boolean {
  const dir = runDir.replace(/\/+$/, "");
  return holder.cwd === dir || holder.command.includes(`${dir}/`);
}
