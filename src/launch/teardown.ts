/**
 * Teardown: deregister from the router first (clients stop arriving), then stop the coordinator,
 * then the stages (each node within its own deadline, so one unreachable node never holds up the
 * others for longer than the grace period: see coordinatorFirst).
 * Idempotent: running it twice, or on a half-launched cluster, is safe.
 *
 * What could not be stopped (its node did not answer within `reachMs`, or it survived SIGKILL) stays
 * in the ledger as the entry's processes, with the entry's ports and phase `tearing-down`: the
 * leftovers. The next pass tears that entry down again before it launches anything (the decision
 * table replaces an entry that is not running), so when the node comes back its leftovers are
 * stopped, and their ports freed, before any new process starts: no duplicate engine ever runs.
 * A leftover whose node did not answer is marked `unreachable`, so the daemon can watch that node
 * and ask for that pass as soon as it answers (src/reconciler/leftovers).
 */
import { posix } from "node:path";
import type { NodeAccess } from "../nodes/index.js";
import type { Registrar } from "../router/index.js";
import { messageOf, ShardctlError } from "../errors/index.js";
import type { Ledger, LedgerEntry, LedgerProcess } from "./ledger.js";
import { stopLeftoverListeners } from "./leftover-listeners.js";
import { claimOf, renewClaim, type RunClaim } from "./run-claim.js";

import { defaultReachMs, processLabel, stopBoundMs, stopEngineProcess, type StopOptions, type StopOutcome } from "./processes.js";
import type { TimelineEvent } from "./types.js";

export interface TeardownContext {
  ledger: Ledger;
  registrar: Registrar;
  /** Node access by ledger node name ("local" included). */
  nodeFor: (name: string) => NodeAccess;
  /** SIGTERM → SIGKILL grace period, ms. */
  graceMs: number;
  /** Deadline of each question to a node, ms. Default 2000 (see processes.ts). */
  reachMs?: number;
  /** Processes already seen exiting, as `node:pid`: their start time is not asked again. */
  seenGone?: ReadonlySet<string>;
  /**
   * Stop everything at once rather than the coordinator first (see coordinatorFirst): a death's
   * teardown, where the pipeline is broken and nothing is left to finish. Default false.
   */
  atOnce?: boolean;
  /**
   * The daemon tearing down: what its launches left out of reach is looked for only in run folders
   * no other daemon claimed (see run-claim.ts). Undefined: in every run folder of the processes.
   */
  claimant?: RunClaim;
  onEvent?: (event: TimelineEvent) => void;
}

export interface TeardownResult {
  stopped: Array<{ label: string; node: string; outcome: StopOutcome }>;
}

/** The key of a process in `seenGone`. */
export function processKey(process: Pick<LedgerProcess, "node" | "pid">): string {
  return `${process.node}:${process.pid}`;
}

export async function teardownCluster(entry: LedgerEntry, context: TeardownContext): Promise<TeardownResult> {
  const event = (step: string, detail?: string): void => context.onEvent?.({ at: new Date().toISOString(), step, ...(detail === undefined ? {} : { detail }) });
  const current: LedgerEntry = { ...entry, phase: "tearing-down" };
  // The ledger records how far the teardown got, but a state directory that takes no writes (full,
  // read-only) must not keep a broken pipeline registered and running: the entry on disk still
  // names every process, so the next pass stops what is left whatever was written, and the record
  // is tried again at the end.
  let unrecorded: unknown;
  const record = async (state: LedgerEntry): Promise<void> => {
    try {
      await context.ledger.write(state);
      unrecorded = undefined;
    } catch (error) {
      unrecorded = error;
    }
  };
  await record(current);

  // Deregister from the router first. A router that cannot be reached does not keep a broken
  // pipeline running: the processes are stopped regardless and the deregistration is retried.
  const failures: string[] = [];
  if (current.routerBackend !== undefined) {
    try {
      await context.registrar.deregister(current.routerBackend);
      event("router-deregistered", current.routerBackend);
      delete current.routerBackend;
      await record(current);
    } catch (error) {
      failures.push(`could not remove backend "${current.routerBackend}" from the router: ${messageOf(error)}`);
    }
  }

  // Stop every node's processes at once, each node within its deadline; the stages once the
  // coordinator is gone, or once its grace period has passed (see coordinatorFirst).
  const result: TeardownResult = { stopped: [] };
  const remaining: LedgerProcess[] = [];
  const byNode = new Map<string, LedgerProcess[]>();
  const order = stopOrder(current.processes);
  for (const process of order) byNode.set(process.node, [...(byNode.get(process.node) ?? []), process]);
  const turn = coordinatorFirst(context.atOnce === true ? [] : current.processes, context.graceMs);
  const outcomes = (await Promise.all([...byNode].map(([nodeName, processes]) => stopOnNode(context, nodeName, processes, turn)))).flat();
  // The timeline tells them in stop order (coordinator, then stages from the last), whichever ended first.
  outcomes.sort((a, b) => order.indexOf(a.process) - order.indexOf(b.process));
  for (const { process, outcome, error } of outcomes) {
    const label = processLabel(process.role, process.index);
    if (outcome !== undefined) {
      result.stopped.push({ label, node: process.node, outcome });
      event(`${label}-stopped`, `${outcome} (pid ${process.pid} on ${process.node})`);
    }
    if (outcome === "survived") failures.push(`${label} (pid ${process.pid} on ${process.node}) survived SIGKILL`);
    if (outcome === undefined) failures.push(`${label} on ${process.node}: ${error}`);
    if (outcome === undefined) remaining.push({ ...process, unreachable: true });
    if (outcome === "survived") remaining.push(answered(process));
  }

  if (remaining.length > 0 || current.routerBackend !== undefined) {
    const leftovers = remaining.map((p) => `${processLabel(p.role, p.index)} (pid ${p.pid} on ${p.node})`);
    if (leftovers.length > 0) event("leftovers", `${leftovers.join(", ")}: stopped before anything is launched there again`);
    await record({ ...current, processes: stopOrder(remaining) });
    throw new ShardctlError("TeardownIncomplete", `teardown of cluster "${entry.cluster}" is incomplete, will retry: ${failures.join("; ")}`);
  }
  try {
    await context.ledger.remove(entry.cluster);
    // Removed: whatever could not be written on the way is moot (a full disk refuses writes, not removals).
    unrecorded = undefined;
  } catch (error) {
    unrecorded = error;
  }
  if (unrecorded !== undefined) {
    throw new ShardctlError(
      "TeardownFailed",
      `cluster "${entry.cluster}" is torn down (every process stopped, its router entry removed), but its ledger entry in ${context.ledger.dir} could not be updated (${messageOf(unrecorded)}): free space there, or make it writable; retried with back-off meanwhile`,
      { cause: unrecorded },
    );
  }
  event("torn-down");
  return result;
}

type NodeOutcome = { process: LedgerProcess; outcome?: StopOutcome; error?: string };

/** When each process of a teardown is signalled: `stagesMay` resolves when the stages' turn comes. */
interface StopTurn {
  stagesMay: Promise<void>;
  /** Said when a coordinator's stop has ended (however it ended). */
  coordinatorEnded(): void;
  /** How much later than the coordinator a stage may be signalled, ms (for the node's deadline). */
  delayMs: number;
}

/**
 * The coordinator is stopped first and the stages after it: a coordinator that stops gracefully
 * (shard-engine's drains for up to 3 s on SIGTERM) finishes the requests it is generating while its
 * pipeline still runs, rather than seeing its stages go first and failing them all as a broken
 * pipeline. The stages wait for it at most its grace period: a coordinator whose node does not
 * answer holds nothing up for longer. Without a coordinator process (an engine whose last stage
 * serves HTTP), everything is stopped at once.
 */
function coordinatorFirst(processes: readonly LedgerProcess[], graceMs: number): StopTurn {
  const coordinators = processes.filter((p) => p.role === "coordinator").length;
  if (coordinators === 0) return { stagesMay: Promise.resolve(), coordinatorEnded: () => undefined, delayMs: 0 };
  let ended = 0;
  let open!: () => void;
  const stagesMay = new Promise<void>((resolve) => (open = resolve));
  setTimeout(open, graceMs).unref();
  return {
    stagesMay,
    coordinatorEnded: () => {
      if (++ended >= coordinators) open();
    },
    delayMs: graceMs,
  };
}

/**
 * Stop one node's processes (at once), then remove the launch's token there (the token dies with its
 * launch: no stale secret is left in a run directory). Whatever has not ended within the node's
 * deadline is reported unstopped; its questions end on their own within `reachMs`.
 */
async function stopOnNode(context: TeardownContext, nodeName: string, processes: LedgerProcess[], turn: StopTurn): Promise<NodeOutcome[]> {
  const stop: StopOptions = { graceMs: context.graceMs, reachMs: context.reachMs ?? defaultReachMs };
  const stages = processes.some((p) => p.role !== "coordinator");
  const boundMs = stopBoundMs(stop) + (stages ? turn.delayMs : 0);
  const outcomes: NodeOutcome[] = processes.map((process) => ({ process, error: `no answer within ${boundMs} ms` }));
  let node: NodeAccess;
  try {
    node = context.nodeFor(nodeName);
  } catch (error) {
    for (const process of processes) if (process.role === "coordinator") turn.coordinatorEnded();
    return processes.map((process) => ({ process, error: messageOf(error) }));
  }
  const work = (async () => {
    await Promise.all(
      processes.map(async (process, i) => {
        const coordinator = process.role === "coordinator";
        if (!coordinator) await turn.stagesMay;
        try {
          // A process that outlives its grace period is said as it is killed, not only once it is gone.
          const onKill = (detail: string): void =>
            context.onEvent?.({ at: new Date().toISOString(), step: `${processLabel(process.role, process.index)}-killing`, detail: `${detail} (on ${nodeName})` });
          outcomes[i] = { process, outcome: await stopWithRetry(node, process, { ...stop, seenGone: context.seenGone?.has(processKey(process)) === true, onKill }) };
        } catch (error) {
          outcomes[i] = { process, error: messageOf(error) };
        } finally {
          if (coordinator) turn.coordinatorEnded();
        }
      }),
    );
    // A node that did not answer is not asked again in this teardown: its token goes with its leftovers.
    if (outcomes.some((o) => o.outcome === undefined)) return;
    const runDirs = new Set(processes.map((p) => p.runDir));
    // What the launch started that left the process group and the mark, and still listens; in a
    // folder another daemon has claimed since (or whose claim cannot be read now), what listens
    // may be that daemon's. The daemon's own claim is renewed: its relaunch follows the back-off.
    const claimant = context.claimant;
    const ours = await Promise.all(
      [...runDirs].map(async (dir) => {
        if (claimant === undefined) return dir;
        if ((await claimOf(node, dir, claimant)) !== "mine") return undefined;
        await renewClaim(node, dir, claimant);
        return dir;
      }),
    );
    const sweep = ours.filter((dir): dir is string => dir !== undefined);
    await stopLeftoverListeners(node, nodeName, sweep, stop.graceMs, (step, detail) => context.onEvent?.({ at: new Date().toISOString(), step, detail }));
    await Promise.all([...runDirs].map((dir) => removeToken(node, dir, stop.reachMs!)));
  })();
  await Promise.race([work, new Promise((resolve) => setTimeout(resolve, boundMs).unref())]);
  return outcomes.map((o) => ({ ...o }));
}

/**
 * One retry when a node command fails fast (an SSH channel can close without its exit status): the
 * outcome is checked against the start time again, so retrying never signals a recycled pid. A node
 * that did not answer in time is not asked again here: the next pass does.
 */
async function stopWithRetry(node: NodeAccess, process: LedgerProcess, options: StopOptions): Promise<StopOutcome> {
  const started = performance.now();
  try {
    return await stopEngineProcess(node, process, options);
  } catch (error) {
    if (performance.now() - started >= (options.reachMs ?? defaultReachMs)) throw error;
    return stopEngineProcess(node, process, options);
  }
}

async function removeToken(node: NodeAccess, runDir: string, reachMs: number): Promise<void> {
  try {
    await node.run(["rm", "-f", "--", posix.join(runDir, "transport.token")], { deadlineMs: reachMs });
  } catch {
    // Best effort: an unreachable node keeps its (now useless) token until the next launch rewrites it.
  }
}

/** A process whose node answered this teardown: no longer marked unreachable. */
function answered(process: LedgerProcess): LedgerProcess {
  const { unreachable: _, ...rest } = process;
  return rest;
}

/** Coordinator first, then stages from the last to the first. */
function stopOrder(processes: readonly LedgerProcess[]): LedgerProcess[] {
  const rank = (p: LedgerProcess): number => (p.role === "coordinator" ? Number.MAX_SAFE_INTEGER : (p.index ?? 0));
  return [...processes].sort((a, b) => rank(b) - rank(a));
}
