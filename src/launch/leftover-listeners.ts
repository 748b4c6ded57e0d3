/**
 * What a launch left listening that its teardown cannot reach: an engine that detached itself with a
 * clean environment (`docker run -d`, a double fork that clears its environment) leaves the process
 * group and the mark supervision follows, and would hold its ports and answer in place of the next
 * launch's processes. It is known by its command line naming the launch's own files (the cluster
 * config in the run directory, which belongs to this cluster alone). A teardown stops such listeners
 * after the processes it recorded, and a launch before it starts, each said in the timeline.
 */
import { showText } from "../errors/index.js";
import { listenersNaming, type NodeAccess, type PortListener } from "../nodes/index.js";
import { defaultReachMs, waitGone } from "./processes.js";

/** The files a launch writes in a run directory that an engine is handed on its command line (every driver's cluster config). */
const launchFileNames = ["cluster.toml", "hostfile.json"];

/** The paths of those files in `runDir`: a process whose command line names one was started by that launch. */
export function launchFilesIn(runDir: string): string[] {
  return launchFileNames.map((name) => `${runDir.replace(/\/+$/, "")}/${name}`);
}

/** Stop the listeners on `node` that name a launch file of one of `runDirs`; each said with `say`. */
export async function stopLeftoverListeners(
  node: NodeAccess,
  nodeName: string,
  runDirs: readonly string[],
  graceMs: number,
  say: (step: string, detail: string) => void,
): Promise<void> {
  const paths = runDirs.flatMap(launchFilesIn);
  for (const left of await listenersNaming(node, paths)) {
    const stopped = await stopListener(node, left, graceMs);
    say(
      "leftover-stopped",
      `pid ${left.pid} on ${nodeName} (${clipCommand(left.command)}), started by an earlier launch of the cluster (its command names the launch's files), still listened: ${stopped ? "stopped" : "it outlived SIGKILL"}`,
    );
  }
}

/** A command line in a message: escaped, at most 200 characters. */
export function clipCommand(command: string): string {
  const shown = showText(command);
  return shown.length > 200 ? `${shown.slice(0, 200)}…` : shown;
}

/**
 * SIGTERM, then SIGKILL after `graceMs`; true once it is gone. Only the process of the start time
 * listed with it is signalled: a pid that ended and was reused meanwhile is left alone. Each
 * question is bounded as a teardown's are, and a node that stops answering is no failure of the
 * caller: the listener is then said not stopped.
 */
async function stopListener(node: NodeAccess, listener: PortListener, graceMs: number): Promise<boolean> {
  const startTime = listener.startTime;
  if (startTime === undefined) return false;
  const process = { pid: listener.pid, startTime };
  const ask = { deadlineMs: defaultReachMs };
  try {
    if (!(await node.signal(listener.pid, "SIGTERM", startTime, ask))) return await waitGone(node, process, 0, ask);
    if (await waitGone(node, process, graceMs, ask)) return true;
    await node.signal(listener.pid, "SIGKILL", startTime, ask);
    return await waitGone(node, process, 2_000, ask);
  } catch {
    return false;
  }
}
