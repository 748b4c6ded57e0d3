/**
 * Teardown: deregister from the router first (clients stop arriving), then stop the coordinator,
 * then the stages in reverse order. Idempotent: running it twice, or on a half-launched cluster,
 * is safe. What could not be stopped stays in the ledger so the next pass retries it.
 */
import { posix } from "node:path";
import type { NodeAccess } from "../nodes/index.js";
import type { Registrar } from "../router/index.js";
import { messageOf, ShardctlError } from "../errors/index.js";
import type { Ledger, LedgerEntry, LedgerProcess } from "./ledger.js";

import { processLabel, stopEngineProcess, type StopOutcome } from "./processes.js";
import type { TimelineEvent } from "./types.js";

export interface TeardownContext {
  ledger: Ledger;
  registrar: Registrar;
  /** Node access by ledger node name ("local" included). */
  nodeFor: (name: string) => NodeAccess;
  /** SIGTERM → SIGKILL grace period, ms. */
  graceMs: number;
  onEvent?: (event: TimelineEvent) => void;
}

export interface TeardownResult {
  stopped: Array<{ label: string; node: string; outcome: StopOutcome }>;
}

export async function teardownCluster(entry: LedgerEntry, context: TeardownContext): Promise<TeardownResult> {
  const event = (step: string, detail?: string): void => context.onEvent?.({ at: new Date().toISOString(), step, ...(detail === undefined ? {} : { detail }) });
  const current: LedgerEntry = { ...entry, phase: "tearing-down" };
  await context.ledger.write(current);

  // Deregister from the router first. A router that cannot be reached does not keep a broken
  // pipeline running: the processes are stopped regardless and the deregistration is retried.
  const failures: string[] = [];
  if (current.routerBackend !== undefined) {
    try {
      await context.registrar.deregister(current.routerBackend);
      event("router-deregistered", current.routerBackend);
      delete current.routerBackend;
      await context.ledger.write(current);
    } catch (error) {
      failures.push(`could not remove backend "${current.routerBackend}" from the router: ${messageOf(error)}`);
    }
  }

  // Stop the coordinator, then the stages in reverse order.
  const result: TeardownResult = { stopped: [] };
  const remaining: LedgerProcess[] = [];
  for (const process of stopOrder(current.processes)) {
    const label = processLabel(process.role, process.index);
    try {
      const outcome = await stopWithRetry(context.nodeFor(process.node), process, context.graceMs);
      result.stopped.push({ label, node: process.node, outcome });
      event(`${label}-stopped`, `${outcome} (pid ${process.pid} on ${process.node})`);
      if (outcome === "survived") {
        remaining.push(process);
        failures.push(`${label} (pid ${process.pid} on ${process.node}) survived SIGKILL`);
      }
    } catch (error) {
      remaining.push(process);
      failures.push(`${label} on ${process.node}: ${messageOf(error)}`);
    }
  }

  // The launch's token dies with it: no stale secret is left in a run directory.
  const runDirs = new Map(current.processes.map((p) => [`${p.node}\0${p.runDir}`, p]));
  await Promise.all([...runDirs.values()].map((p) => removeToken(context, p)));

  if (remaining.length > 0 || current.routerBackend !== undefined) {
    await context.ledger.write({ ...current, processes: remaining });
    throw new ShardctlError("TeardownIncomplete", `teardown of cluster "${entry.cluster}" is incomplete, will retry: ${failures.join("; ")}`);
  }
  await context.ledger.remove(entry.cluster);
  event("torn-down");
  return result;
}

/**
 * One retry when a node command fails (an SSH channel can close without its exit status): the
 * outcome is checked against the start time again, so retrying never signals a recycled pid.
 */
async function stopWithRetry(node: NodeAccess, process: LedgerProcess, graceMs: number): Promise<StopOutcome> {
  try {
    return await stopEngineProcess(node, process, graceMs);
  } catch {
    return stopEngineProcess(node, process, graceMs);
  }
}

async function removeToken(context: TeardownContext, process: LedgerProcess): Promise<void> {
  try {
    await context.nodeFor(process.node).remove(posix.join(process.runDir, "transport.token"));
  } catch {
    // Best effort: an unreachable node keeps its (now useless) token until the next launch rewrites it.
  }
}

/** Coordinator first, then stages from the last to the first. */
function stopOrder(processes: readonly LedgerProcess[]): LedgerProcess[] {
  const rank = (p: LedgerProcess): number => (p.role === "coordinator" ? Number.MAX_SAFE_INTEGER : (p.index ?? 0));
  return [...processes].sort((a, b) => rank(b) - rank(a));
}
