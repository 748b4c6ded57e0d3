/**
 * Start, inspect and stop the engine processes of a launch. Every process runs detached in its own
 * session under a wrapper that records its exit status, logs to a file in the launch's run
 * directory, and is only ever signalled after its kernel start time matches the ledger.
 */
import { join } from "node:path";
import type { NodeAccess } from "../nodes/index.js";
import type { LedgerProcess, ProcessRole } from "./ledger.js";

/** Label of a process in file names and messages: `stage-0`, `coordinator`. */
export function processLabel(role: ProcessRole, index?: number): string {
  return role === "stage" ? `stage-${index ?? 0}` : "coordinator";
}

/** Start one engine process detached and describe it for the ledger. */
export async function startEngineProcess(
  node: NodeAccess,
  nodeName: string,
  role: ProcessRole,
  index: number | undefined,
  argv: string[],
  runDir: string,
): Promise<LedgerProcess> {
  const label = processLabel(role, index);
  const logFile = join(runDir, `${label}.log`);
  const exitFile = join(runDir, `${label}.exit`);
  // A previous launch's files would be taken for this one's: an old exit status means "exited".
  await Promise.all([node.remove(logFile), node.remove(exitFile)]);
  const { pid, startTime } = await node.startDetached(argv, { logFile, cwd: runDir, exitStatusFile: exitFile });
  return { role, ...(index === undefined ? {} : { index }), node: nodeName, pid, startTime, runDir, logFile, exitFile };
}

/** True while the recorded process (same pid and start time) still runs. */
export async function isProcessAlive(node: NodeAccess, process: LedgerProcess): Promise<boolean> {
  return (await node.processStartTime(process.pid)) === process.startTime;
}

/** How a process ended, e.g. `exited with status 1` or `killed by SIGKILL (status 137)`. */
export async function describeExit(node: NodeAccess, process: LedgerProcess): Promise<string> {
  const text = await node.readFile(process.exitFile).then((b) => b.toString("utf8").trim(), () => "");
  if (!/^\d+$/.test(text)) return "ended without recording an exit status";
  const status = Number(text);
  if (status > 128) return `killed by ${signalName(status - 128)} (status ${status})`;
  return `exited with status ${status}`;
}

/** The last `count` lines of a process's log (default 20): the evidence kept in the status. */
export async function readLogTail(node: NodeAccess, process: LedgerProcess, count = 20): Promise<string[]> {
  const text = await node.readFile(process.logFile).then((b) => b.toString("utf8"), () => "");
  return text.split("\n").filter((line) => line.length > 0).slice(-count);
}

/** How stopping went: already gone, pid recycled (refused), stopped by SIGTERM or SIGKILL, or not stopped. */
export type StopOutcome = "gone" | "recycled" | "terminated" | "killed" | "survived";

/**
 * Stop a process: SIGTERM, wait up to `graceMs`, then SIGKILL, and verify it is gone. A pid whose
 * start time does not match the ledger is never signalled. Returns how it went, for the timeline.
 */
export async function stopEngineProcess(
  node: NodeAccess,
  process: LedgerProcess,
  graceMs: number,
): Promise<StopOutcome> {
  const startTime = await node.processStartTime(process.pid);
  if (startTime === undefined) return "gone";
  // The pid now belongs to another process: ours is gone, and the other one is not ours to stop.
  if (startTime !== process.startTime) return "recycled";
  if (!(await node.signal(process.pid, "SIGTERM", process.startTime))) return "recycled";
  if (await waitGone(node, process, graceMs)) return "terminated";
  await node.signal(process.pid, "SIGKILL", process.startTime);
  return (await waitGone(node, process, 5_000)) ? "killed" : "survived";
}

async function waitGone(node: NodeAccess, process: LedgerProcess, deadlineMs: number): Promise<boolean> {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    if (!(await isProcessAlive(node, process))) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return !(await isProcessAlive(node, process));
}

const signalNames: Record<number, string> = { 1: "SIGHUP", 2: "SIGINT", 6: "SIGABRT", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM" };

function signalName(n: number): string {
  return signalNames[n] ?? `signal ${n}`;
}
