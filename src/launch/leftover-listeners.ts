/**
 * What a launch left listening that its teardown cannot reach: an engine that detached itself with a
 * clean environment (`docker run -d`, a double fork that clears its environment) leaves the process
 * group and the mark supervision follows, and would hold its ports and answer in place of the next
 * launch's processes. It is known by its command line naming the launch's own files (the cluster
 * config in the run directory, which belongs to this cluster alone). A teardown stops such listeners
 * after the processes it recorded, and a launch before it starts, each said in the timeline.
 */
import { setTimeout as delay } from "node:timers/promises";
import { showText } from "../errors/index.js";
import { listenersNaming, type NodeAccess, type PortListener } from "../nodes/index.js";
import { defaultReachMs } from "./processes.js";

/** The files a launch writes in a run directory that an engine is handed on its command line (every driver's cluster config). */
const launchFileNames = ["cluster.toml", "hostfile.json"];

/** Stop the listeners on `node` that name a launch file of one of `runDirs`; each said with `say`. */
export async function stopLeftoverListeners(
  node: NodeAccess,
  nodeName: string,
  runDirs: readonly string[],
  graceMs: number,
  say: (step: string, detail: string) => void,
): Promise<void> {
  const paths = runDirs.flatMap((dir) => launchFileNames.map((name) => `${dir.replace(/\/+$/, "")}/${name}`));
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
 * question is bounded as a teardown's are: a node that falls silent must not hold the caller.
 */
async function stopListener(node: NodeAccess, listener: PortListener, graceMs: number): Promise<boolean> {
  const startTime = listener.startTime;
  if (startTime === undefined) return false;
  const ask = { deadlineMs: defaultReachMs };
  const goneWithin = async (ms: number): Promise<boolean> => {
    const deadline = Date.now() + ms;
    for (;;) {
      const now = await node.processStartTime(listener.pid, ask).catch((): string => startTime);
      if (now !== startTime) return true;
      if (Date.now() >= deadline) return false;
      await delay(100);
    }
  };
  if (!(await node.signal(listener.pid, "SIGTERM", startTime, ask).catch(() => false))) return goneWithin(0);
  if (await goneWithin(graceMs)) return true;
  await node.signal(listener.pid, "SIGKILL", startTime, ask).catch(() => false);
  return goneWithin(2_000);
}
