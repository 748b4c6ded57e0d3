/**
 * Who listens on a TCP port of a node: the pid and its command line, from `ss -tlnp` (Linux) or
 * `lsof` (macOS, elsewhere). "Stop what holds it" is no advice without
 * saying what that is; and a listener whose command line names a launch's own files (its cluster
 * config) is what that launch started and left behind (an engine that detached itself with a clean
 * environment, beyond the mark supervision finds its strays by).
 */
import { messageOf } from "../errors/index.js";
import { startTimeFunction } from "./shell-scripts.js";
import { parseLocalAddress, type TcpSocket } from "./listening-ports.js";
import type { NodeAccess } from "./types.js";

/** $1 = port. Prints the holder's pid, then its command line; nothing when unknown. */
const portHolderScript = `port=$1
pid=
if command -v ss >/dev/null 2>&1; then pid=$(ss -Htlnp "sport = :$port" 2>/dev/null | sed -n 's/.*pid=\\([0-9][0-9]*\\).*/\\1/p' | head -n 1); fi
if [ -z "$pid" ] && command -v lsof >/dev/null 2>&1; then pid=$(lsof -nP -t -iTCP:"$port" -sTCP:LISTEN 2>/dev/null | head -n 1); fi
[ -n "$pid" ] || exit 0
echo "$pid"
ps -ww -o args= -p "$pid"
exit 0`;

export interface PortListener {
  pid: number;
  /** Its kernel start time, read with the rest (listenersNaming only). */
  startTime?: string;
  /** Its command line, as `ps` shows it ("" when it ended meanwhile). */
  command: string;
}

/** The process listening on `port` at `node`, or undefined when none is found (or the node does not say in time). */
export async function findPortListener(node: NodeAccess, port: number, options: { deadlineMs?: number } = {}): Promise<PortListener | undefined> {
  return (await askPortListener(node, port, options)).listener;
}

/**
 * The process listening on `port` at `node`; or, when the node did not say, why (`no answer within
 * 5000 ms`); neither when it answered and names none (a process `ss` may not show this user).
 * `deadlineMs` defaults to 5000: asked once, on a failure's path, where a loaded node is likely.
 */
export async function askPortListener(node: NodeAccess, port: number, options: { deadlineMs?: number } = {}): Promise<{ listener?: PortListener; unanswered?: string }> {
  const deadlineMs = options.deadlineMs ?? 5_000;
  let failure: string | undefined;
  const result = await node.run(["sh", "-c", portHolderScript, "sh", String(port)], { deadlineMs }).catch((error: unknown) => {
    failure = messageOf(error);
    return undefined;
  });
  if (result === undefined) return { unanswered: failure ?? "no answer" };
  if (result.timedOut) return { unanswered: `no answer within ${deadlineMs} ms` };
  if (result.exitCode !== 0) return {};
  const [pidLine = "", command = ""] = result.stdout.split("\n");
  const pid = Number(pidLine.trim());
  if (!/^\d+$/.test(pidLine.trim()) || pid <= 0) return {};
  return { listener: { pid, command: command.trim() } };
}

/**
 * $@ = paths. Every process listening on TCP whose command line names one of them: pid, start time
 * and command line, tab-separated, one per line (the start time read with the rest: a pid that ends
 * and is reused before it is signalled is not mistaken for it).
 *
 * A machine may have hundreds of listeners and this runs at every launch and teardown, so no
 * process is started per listener: on Linux one grep reads the listeners' command lines from /proc
 * (their arguments NUL-separated) and keeps those naming a path, elsewhere one ps lists every
 * command line. Each candidate is then held to the exact match on its arguments joined by spaces,
 * as ps shows them (a path with a newline in it is two grep patterns, never a looser match).
 */
const listenersNamingScript = `${startTimeFunction}
pids=
if command -v ss >/dev/null 2>&1; then pids=$(ss -Htlnp 2>/dev/null | grep -o 'pid=[0-9]*' | cut -d= -f2 | sort -u)
elif command -v lsof >/dev/null 2>&1; then pids=$(lsof -nP -t -iTCP -sTCP:LISTEN 2>/dev/null | sort -u); fi
[ -n "$pids" ] || exit 0
# $1 = pid, $2 = its arguments joined by spaces, rest = the paths: printed when they name one.
say() {
  pid=$1 args=$2 hit=
  shift 2
  for path; do case $args in *"$path"*) hit=1; break ;; esac; done
  [ -n "$hit" ] || return 0
  t=$(st "$pid")
  [ -n "$t" ] && printf '%s\\t%s\\t%s\\n' "$pid" "$t" "$args"
  return 0
}
if [ -r /proc/self/cmdline ]; then
  files=
  for pid in $pids; do files="$files /proc/$pid/cmdline"; done
  for file in $(grep -l -a -F -e "$(printf '%s\\n' "$@")" $files 2>/dev/null); do
    pid=\${file#/proc/}
    pid=\${pid%/cmdline}
    args=$(tr '\\000' ' ' < "$file" 2>/dev/null) || continue
    say "$pid" "\${args% }" "$@"
  done
else
  listening=" $(echo $pids) "
  ps -A -ww -o pid= -o args= 2>/dev/null | while read -r pid args; do
    case $listening in *" $pid "*) say "$pid" "$args" "$@" ;; esac
  done
fi
exit 0`;

/**
 * The processes listening on TCP at `node` whose command line names one of `paths` (a launch's
 * files: a process handed them was started by that launch); none when the node does not say in time.
 */
export async function listenersNaming(node: NodeAccess, paths: readonly string[], options: { deadlineMs?: number } = {}): Promise<PortListener[]> {
  if (paths.length === 0) return [];
  const result = await node.run(["sh", "-c", listenersNamingScript, "sh", ...paths], { deadlineMs: options.deadlineMs ?? 2_000 }).catch(() => undefined);
  if (result === undefined || result.exitCode !== 0) return [];
  return result.stdout
    .split("\n")
    .map((line) => /^(\d+)\t([^\t]+)\t(.*)$/.exec(line))
    .filter((match): match is RegExpExecArray => match !== null)
    .map(([, pid, startTime, command]) => ({ pid: Number(pid), startTime: startTime!, command: command!.trim() }));
}

/**
 * $@ = pids. The local address of every TCP socket one of them listens on, one per line: from
 * `ss -Htlnp` (its fourth column; the process column names `pid=N,`), else `lsof` (its next to last).
 */
const addressesListenedByScript = `if command -v ss >/dev/null 2>&1; then
  ss -Htlnp 2>/dev/null | while read -r state recvq sendq local peer rest; do
    for pid; do case $rest in *"pid=$pid,"*) echo "$local"; break ;; esac; done
  done
elif command -v lsof >/dev/null 2>&1; then
  lsof -nP -a -p "$(echo "$@" | tr ' ' ,)" -iTCP -sTCP:LISTEN 2>/dev/null | awk 'NR > 1 { print $(NF - 1) }'
fi
exit 0`;

/**
 * The TCP sockets the processes `pids` listen on at `node`, without repeats; undefined when the
 * node does not say within the deadline (default 5000 ms).
 */
export async function addressesListenedBy(node: NodeAccess, pids: readonly number[], options: { deadlineMs?: number } = {}): Promise<TcpSocket[] | undefined> {
  if (pids.length === 0) return [];
  const result = await node.run(["sh", "-c", addressesListenedByScript, "sh", ...pids.map(String)], { deadlineMs: options.deadlineMs ?? 5_000 }).catch(() => undefined);
  if (result === undefined || result.exitCode !== 0) return undefined;
  const sockets = new Map<string, TcpSocket>();
  for (const line of result.stdout.split("\n")) {
    const socket = parseLocalAddress(line.trim());
    if (socket !== undefined) sockets.set(`${socket.address} ${socket.port}`, socket);
  }
  return [...sockets.values()];
}
