/**
 * Which members of a cluster are stopped, for a hang that names nobody (a generation that never
 * returns: any member of the pipeline may hold it up). A member is stopped when a live process of
 * the group it leads (its wrapper and the engine under it) is in a stopped state as `ps` says it on
 * the member's node: "T" (SIGSTOP, a job-control stop) or "t" (held by a tracer, Linux). A hang
 * with no such sign (a deadlock, a partition) finds nobody, and nobody is then named.
 */
import { labelOf } from "./labels.js";
import type { HealthDeps, WatchedCluster, WatchedProcess } from "./types.js";

export interface StoppedMember {
  process: WatchedProcess;
  /** The stopped process of its group (the engine, or the wrapper itself). */
  pid: number;
  /** "stopped": a stop signal; "traced": held by a tracer (a debugger, ptrace). */
  state: "stopped" | "traced";
}

/**
 * Ask every node of the cluster (or the node `only`) once, all at once, each within `deadlineMs`; a
 * node that does not answer (or a `ps` that fails) says nothing. Members come back in the cluster's
 * process order.
 */
export async function findStoppedMembers(cluster: WatchedCluster, nodeFor: HealthDeps["nodeFor"], deadlineMs: number, only?: string): Promise<StoppedMember[]> {
  return (await lookForStoppedMembers(cluster, nodeFor, deadlineMs, only)).stopped;
}

/** A member one of whose processes waits in the kernel uninterruptibly ("D": I/O, most often its disk). */
export interface DiskWaitingMember {
  process: WatchedProcess;
  pid: number;
}

/**
 * As findStoppedMembers, and which nodes answered: a member of a node that did not answer is
 * neither stopped nor running as far as this look can tell. Also the members waiting on I/O
 * ("D"): no fault by itself (a load reads its weights), but one seen so look after look while a
 * launch waits for it to listen is held up by its disk.
 */
export async function lookForStoppedMembers(
  cluster: WatchedCluster,
  nodeFor: HealthDeps["nodeFor"],
  deadlineMs: number,
  only?: string,
): Promise<{ stopped: StoppedMember[]; diskWaiting: DiskWaitingMember[]; answered: ReadonlySet<string> }> {
  const nodes = [...new Set(cluster.processes.map((p) => p.node))].filter((name) => only === undefined || name === only);
  const listings = new Map(await Promise.all(nodes.map(async (name) => [name, await listStates(nodeFor, name, deadlineMs)] as const)));
  const rowsOf = (process: WatchedProcess): StateRow[] => listings.get(process.node)?.filter((row) => row.pgid === process.pid) ?? [];
  const stopped = cluster.processes.flatMap((process) => {
    const found = rowsOf(process).find((row) => row.state === "stopped" || row.state === "traced");
    return found === undefined ? [] : [{ process, pid: found.pid, state: found.state as StoppedMember["state"] }];
  });
  const diskWaiting = cluster.processes.flatMap((process) => {
    const found = rowsOf(process).find((row) => row.state === "disk");
    return found === undefined ? [] : [{ process, pid: found.pid }];
  });
  return { stopped, diskWaiting, answered: new Set([...listings].filter(([, rows]) => rows !== undefined).map(([name]) => name)) };
}

/** "pid 812 in state T, a stop signal such as SIGSTOP": what was seen of a stopped member. */
export function describeStopped(member: StoppedMember): string {
  return `pid ${member.pid} in state ${member.state === "stopped" ? "T, a stop signal such as SIGSTOP" : "t, held by a tracer"}`;
}

/** "stage-1 on n2: stopped too (pid …)": a further stopped member, as a part of a death's message of its own. */
export function alsoStopped(member: StoppedMember): string {
  return `${labelOf(member.process)} on ${member.process.node}: stopped too (${describeStopped(member)})`;
}

interface StateRow {
  pgid: number;
  pid: number;
  state: StoppedMember["state"] | "disk";
}

/** The stopped processes of a node, and those waiting on I/O; undefined when it did not answer (or its `ps` failed). */
async function listStates(nodeFor: HealthDeps["nodeFor"], name: string, deadlineMs: number): Promise<StateRow[] | undefined> {
  // `-A -o pgid= -o pid= -o stat=` reads the same on Linux (procps) and macOS.
  const listing = await nodeFor(name)
    .run(["ps", "-A", "-o", "pgid=", "-o", "pid=", "-o", "stat="], { deadlineMs })
    .catch(() => undefined);
  if (listing === undefined || listing.exitCode !== 0) return undefined;
  return listing.stdout.split("\n").flatMap((line) => {
    const match = /^\s*(\d+)\s+(\d+)\s+([TtD])/.exec(line);
    if (match === null) return [];
    const state = match[3] === "T" ? ("stopped" as const) : match[3] === "t" ? ("traced" as const) : ("disk" as const);
    return [{ pgid: Number(match[1]), pid: Number(match[2]), state }];
  });
}
