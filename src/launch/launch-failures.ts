/**
 * How a launch failure is worded: a process that exited (with its log, and PortInUse when its port
 * is held by a socket on its node), a node that stopped answering, and any error as a LaunchError.
 */
import type { Endpoint, EngineTopology } from "../engines/index.js";
import type { LedgerEntry, LedgerProcess } from "./ledger.js";
import { LaunchError } from "./launch-error.js";
import { addressesListenedByProcess, defaultReachMs, describeEnd, isProcessAlive, processLabel, readLogTail } from "./processes.js";
import type { LaunchRequest } from "./types.js";
import { boundSockets, listeningSockets, socketClashes, socketCovers, type NodeAccess, type TcpSocket } from "../nodes/index.js";
import { isShardctlError, messageOf } from "../errors/index.js";
import type { LaunchInFlight } from "./launch-waits.js";

/**
 * A process of the launch that exited while the launch waited for `awaited`, named with how it
 * ended and its log. (A stage whose port another process held may have been seen listening: that
 * process answered the launch's probe in its place.)
 */
export async function exitedWhileAwaiting(exited: LedgerProcess, launch: LaunchInFlight, step: string, awaited: string, cause?: unknown): Promise<LaunchError> {
  const node = launch.nodes.get(exited.node)!;
  const message = `${processLabel(exited.role, exited.index)} on ${exited.node} ${await describeEnd(node, exited)} while the launch waited for ${awaited}`;
  return exitError(exited, message, step, await readLogTail(node, exited), launch.portHeld, cause);
}

/**
 * Whether a socket on a process's node holds an address it binds now (undefined: not known): what
 * makes its log's "port taken" true. A stage binds its transport address; a coordinator its control
 * address and its HTTP listener. When another process of the same launch listens there (an engine
 * that opens a port of its own, which may be the next one's), its label.
 */
export type PortHeld = (process: LedgerProcess) => Promise<boolean | undefined | { byLaunch: string }>;

/** PortHeld for the processes of `topology`, from their nodes' socket tables (every state: an outgoing connection holds its port too). */
export function portHeldBy(request: LaunchRequest, topology: EngineTopology, nodes: Map<string, NodeAccess>, entry: LedgerEntry): PortHeld {
  return async (process) => {
    const addresses = boundAddressesOf(process, request, topology);
    if (addresses.length === 0) return undefined;
    const node = nodes.get(process.node)!;
    const covers = (sockets: TcpSocket[] | undefined): boolean | undefined =>
      sockets?.some((s) => addresses.some((address) => s.port === address.port && socketCovers(s, address.host)));
    // A wildcard address is kept from binding by a listener on any one address of its port; not by
    // a connection there (one a stopped process left, lingering a minute), as a listener binds over it.
    const clashes = (listeners: TcpSocket[] | undefined): boolean | undefined =>
      listeners?.some((s) => addresses.some((address) => s.port === address.port && socketClashes(s, address.host)));
    const [bound, listening] = await Promise.all([boundSockets(node, { deadlineMs: defaultReachMs }), listeningSockets(node, { deadlineMs: defaultReachMs })]);
    const held = covers(bound) === true || clashes(listening) === true ? true : bound === undefined ? undefined : false;
    if (held !== true) return held;
    for (const other of entry.processes.filter((p) => p.node === process.node && p.pid !== process.pid)) {
      if (clashes(await addressesListenedByProcess(node, other)) === true) return { byLaunch: processLabel(other.role, other.index) };
    }
    return true;
  };
}

/** The addresses `process` binds: a stage's transport address, a coordinator's control and HTTP addresses. */
export function boundAddressesOf(process: LedgerProcess, request: LaunchRequest, topology: EngineTopology): Endpoint[] {
  if (process.role === "coordinator") return [topology.coordinator.address, topology.coordinator.http];
  const at = request.stages.findIndex((s) => s.index === process.index);
  const address = at >= 0 ? topology.stages[at]?.address : undefined;
  return address === undefined ? [] : [address];
}

/**
 * The error of a launch process that exited (`exited`: the words so far). A process whose log says
 * its port was taken is PortInUse (given back to the budget) when a socket on its node holds an
 * address it binds now, or the node cannot say; when none does, the words are taken for the
 * engine's own failure and counted: an engine that says them for another fault would otherwise be
 * retried for ever.
 */
export async function exitError(process: LedgerProcess, exited: string, step: string, logTail: string[], portHeld: PortHeld, cause?: unknown): Promise<LaunchError> {
  const reason = process.role === "stage" ? "StageExited" : "CoordinatorExited";
  const taken = portTakenIn(logTail);
  if (taken === undefined) return new LaunchError(reason, step, exited, { logTail, cause });
  const held = await portHeld(process).catch(() => undefined);
  if (held === false) {
    const note = `its log says its port was taken ("${taken}"), but no socket on ${process.node} holds it now: counted as the engine's own failure`;
    return new LaunchError(reason, step, `${exited} (${note})`, { logTail, cause });
  }
  // Taken by the launch itself: trying again would take it again, so it is the engine's failure.
  if (typeof held === "object") {
    const note = `its port was taken ("${taken}") by ${held.byLaunch} of this same launch, which listens there besides the address shardctl gave it: the engine opens a port of its own that collides with the ones shardctl hands out (the transport range and the coordinator's ports); keep the engine's own ports out of them. Counted as the engine's own failure`;
    return new LaunchError(reason, step, `${exited}: ${note}`, { logTail, cause });
  }
  return new LaunchError("PortInUse", step, `${exited}: ${portTakenAdvice(process.role === "stage" ? "transport port" : "control or HTTP port", taken)}`, {
    logTail,
    cause,
  });
}

/**
 * Liveness during a wait: a probe that fails (the node's answer got lost) counts as "still alive"
 * so the wait goes on; the phase's deadline still bounds it. Each probe is bounded as a teardown's
 * questions are (2 s): a node partitioned during the wait must not hold it past its deadline for as
 * long as its connection takes to drop. `silence()` is what a timeout's message adds when the node
 * did not answer the last probe: a stage that "did not listen" because its node went silent is told
 * apart from one that is slow.
 */
export function livenessOf(node: NodeAccess, process: LedgerProcess): { isAliveOrUnknown(): Promise<boolean>; silence(): string } {
  let unanswered: { since: number; why: string } | undefined;
  return {
    async isAliveOrUnknown() {
      try {
        const alive = await isProcessAlive(node, process, { deadlineMs: defaultReachMs });
        unanswered = undefined;
        return alive;
      } catch (error) {
        unanswered ??= { since: performance.now(), why: messageOf(error) };
        return true;
      }
    },
    silence() {
      if (unanswered === undefined) return "";
      return `; node ${process.node} has not answered its liveness probes for the last ${Math.round(performance.now() - unanswered.since)} ms (${unanswered.why}): it may be unreachable`;
    },
  };
}

/**
 * The log tail of a process whose wait failed, unless its node stopped answering its liveness
 * probes: that read would only hold the failure up for its bound (2 s).
 */
export function tailUnlessSilent(node: NodeAccess, process: LedgerProcess, liveness: { silence(): string }): Promise<string[]> {
  return liveness.silence() === "" ? readLogTail(node, process) : Promise.resolve([]);
}

export function asLaunchError(error: unknown, step = "launch"): LaunchError {
  if (error instanceof LaunchError) return error;
  if (isShardctlError(error, "PortRangeExhausted")) return new LaunchError("PortRangeExhausted", step, error.message, { cause: error });
  if (isShardctlError(error, "NodeUnreachable")) return new LaunchError("NodeUnreachable", step, error.message, { cause: error });
  if (isShardctlError(error, "StateDirUnwritable")) {
    const advice =
      "the daemon records what it starts in its state directory before it starts it: free space on that disk, or make the folder writable for the daemon's user (the launch is tried again meanwhile, not counted against the restart budget)";
    return new LaunchError("StateDirUnwritable", step, `could not record the launch: ${error.message}; ${advice}`, { cause: error });
  }
  return new LaunchError("LaunchFilesFailed", step, messageOf(error), { cause: error });
}

export function hostForUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/**
 * A stage's port, free when allocated, taken before it could listen. On Linux the default
 * port_range (39600-39629) lies in the ephemeral range (net.ipv4.ip_local_port_range, 32768-60999
 * by default), which the node gives to outgoing connections and to servers listening on port 0.
 */
function portTakenIn(logTail: readonly string[]): string | undefined {
  // Node.js says EADDRINUSE; Python, Go, Rust and C programs print the system's own words.
  for (const line of logTail) {
    const words = /EADDRINUSE|address already in use/i.exec(line);
    if (words !== null) return words[0];
  }
  return undefined;
}

/** `evidence`: the log's words that said the port (`port`: which) was taken. */
function portTakenAdvice(port: string, evidence: string): string {
  return `its ${port} was taken after it was found free (${evidence}). If the transport port range (the definition's [transport] port_range, or the settings' [distributed] port_range) lies in the node's ephemeral port range, reserve it there: sysctl -w net.ipv4.ip_local_reserved_ports=<the range>`;
}
