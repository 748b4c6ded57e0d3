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

/**
 * As findStoppedMembers, and which nodes answered: a member of a node that did not answer is
 * neither stopped nor running as far as this look can tell.
 */
export async function lookForStoppedMembers(
  cluster: WatchedCluster,
  nodeFor: HealthDeps["nodeFor"],
  deadlineMs: number,
  only?: string,
): Promise<{ stopped: StoppedMember[]; answered: ReadonlySet<string> }> {
  const nodes = [...new Set(cluster.processes.map((p) => p.node))].filter((name) => only === undefined || name === only);
  const listings = new Map(await Promise.all(nodes.map(async (name) => [name, await listStopped(nodeFor, name, deadlineMs)] as const)));
  const stopped = cluster.processes.flatMap((process) => {
    const found = listings.get(process.node)?.find((row) => row.pgid === process.pid);
    return found === undefined ? [] : [{ process, pid: found.pid, state: found.state }];
  });
  return { stopped, answered: new Set([...listings].filter(([, rows]) => rows !== undefined).map(([name]) => name)) };
}

/** "pid 812 in state T, a stop signal such as SIGSTOP": what was seen of a stopped member. */
export function describeStopped(member: StoppedMember): string {
  return `pid ${member.pid} in state ${member.state === "stopped" ? "T, a stop signal such as SIGSTOP" : "t, held by a tracer"}`;
}

/** "stage-1 on n2: stopped too (pid …)": a further stopped member, as a part of a death's message of its own. */
export function alsoStopped(member: StoppedMember): string {
  return `${labelOf(member.process)} on ${member.process.node}: stopped too (${describeStopped(member)})`;
}

interface StoppedRow {
  pgid: number;
  pid: number;
  state: StoppedMember["state"];
}

/** The stopped processes of a node; undefined when it did not answer (or its `ps` failed). */
async function listStopped(nodeFor: HealthDeps["nodeFor"], name: string, deadlineMs: number): Promise<StoppedRow[] | undefined> {
  // `-A -o pgid= -o pid= -o stat=` reads the same on Linux (procps) and macOS.
  const listing = await nodeFor(name)
    .run(["ps", "-A", "-o", "pgid=", "-o", "pid=", "-o", "stat="], { deadlineMs })
    .catch(() => undefined);
  if (listing === undefined || listing.exitCode !== 0) return undefined;
  return listing.stdout.split("\n").flatMap((line) => {
    const match = /^\s*(\d+)\s+(\d+)\s+([Tt])/.exec(line);
    return match === null ? [] : [{ pgid: Number(match[1]), pid: Number(match[2]), state: match[3] === "T" ? ("stopped" as const) : ("traced" as const) }];
  });
}
