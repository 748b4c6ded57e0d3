/**
 * Ports for a launch: the definition's own HTTP port (refused when taken, naming what holds it),
 * then a transport port per stage and the coordinator's control port from the transport range,
 * free in the nodes' socket tables and by connecting; and the engine topology built on them.
 */
import type { EngineTopology } from "../engines/index.js";
import type { LedgerEntry } from "./ledger.js";
import { LaunchError } from "./launch-error.js";
import { allocatePorts, type PortHolder, type PortRequest } from "./ports.js";
import { defaultReachMs } from "./processes.js";
import type { LaunchContext, LaunchRequest } from "./types.js";
import { askPortListener, boundSockets, joinHostPort, listeningSockets, socketClashes, type NodeAccess, type TcpSocket } from "../nodes/index.js";
import { ShardctlError } from "../errors/index.js";
import { clipCommand } from "./leftover-listeners.js";
import { asLaunchError } from "./launch-failures.js";

/** A port the launch asks of its transport range, and the node it is probed on. */
export interface TransportPortRequest extends PortRequest {
  node: NodeAccess;
}

/**
 * What a launch asks of its transport range, in this order: a port per stage at the address it
 * binds, then the coordinator's control port when the engine runs a coordinator process. Shared
 * by the allocation and the look before a launch (the reconciler's refuse-held step), so both
 * name the same requests in their messages.
 */
export function transportPortRequests(
  stages: ReadonlyArray<{ index: number; nodeName: string; host: string; node: NodeAccess }>,
  coordinator: { nodeName: string; host: string; node: NodeAccess } | undefined,
): TransportPortRequest[] {
  return [
    ...stages.map((s) => ({ label: `stage-${s.index} on ${s.nodeName}`, host: s.host, node: s.node })),
    ...(coordinator === undefined ? [] : [{ label: `coordinator on ${coordinator.nodeName}`, host: coordinator.host, node: coordinator.node }]),
  ];
}

/** The ports other clusters' ledger entries record, each named by its cluster for an exhausted range's message. */
export function portsHeldBy(entries: readonly LedgerEntry[]): PortHolder[] {
  return entries.flatMap((e) => e.ports.map((p) => ({ host: p.host, port: p.port, holder: `cluster ${e.cluster}` })));
}

/** The launch's own HTTP port, held while its range's ports are chosen (the range may include it). */
export function ownHttpListener(host: string, port: number): PortHolder {
  return { host, port, holder: "this cluster's HTTP listener" };
}

/** Choose and record the launch's ports (in `entry.ports`) and return the topology the engine is given. */
export async function allocateTopology(request: LaunchRequest, context: LaunchContext, entry: LedgerEntry): Promise<EngineTopology> {
  const coordinator = request.coordinator;
  // A port is taken when a socket on its node holds it, in any state: a listener, but also an
  // outgoing connection whose local port the kernel picked there (the range may lie in the
  // ephemeral one: the daemon's own SSH connection to a node once held a coordinator's control port,
  // which a connection never finds, and every launch failed on it). The nodes' socket tables are
  // read once per node. A ring's listener takes the first connection it accepts as its neighbour,
  // so for a ring the table is the only look (a connection would break another ring waiting there).
  const readiness = request.driver.facts.readiness;
  const tables = new Map<NodeAccess, Promise<TcpSocket[] | undefined>>();
  const heldInTable = async (node: NodeAccess, host: string, port: number): Promise<boolean | undefined> => {
    let table = tables.get(node);
    if (table === undefined) tables.set(node, (table = boundSockets(node, { deadlineMs: defaultReachMs })));
    return (await table)?.some((s) => s.port === port && socketClashes(s, host));
  };
  // The HTTP port is the definition's own: refuse it when taken rather than picking another, naming
  // what holds it where the node says. Taken: it answers, or a listener on the node keeps it from
  // being bound (a wildcard host cannot be bound beside a listener on one address of the port).
  // Listeners only: the connections a coordinator just stopped accepted linger (FIN-WAIT) on the
  // port for up to a minute, and hold nothing a new listener cares about.
  if (
    (await coordinator.node.isPortOpen(coordinator.bindHost, coordinator.httpPort, 1_000)) ||
    (await listeningSockets(coordinator.node, { deadlineMs: defaultReachMs }))?.some((s) => s.port === coordinator.httpPort && socketClashes(s, coordinator.bindHost)) ===
      true
  ) {
    const { listener: holder, unanswered } = await askPortListener(coordinator.node, coordinator.httpPort);
    const by =
      holder !== undefined
        ? ` by pid ${holder.pid} (${clipCommand(holder.command)})`
        : unanswered !== undefined
          ? ` (what holds it could not be asked: ${unanswered})`
          : "";
    throw new LaunchError(
      "PortInUse",
      "ports",
      `the coordinator's HTTP port ${joinHostPort(coordinator.bindHost, coordinator.httpPort)} is already in use on ${coordinator.nodeName}${by}; choose another [coordinator] port or stop what holds it`,
    );
  }
  // A coordinator process needs a control port; an engine whose last stage serves HTTP has none.
  const hasCoordinator = request.driver.facts.readiness.httpServer === "coordinator";
  const requests = transportPortRequests(
    request.stages.map((s) => ({ index: s.index, nodeName: s.nodeName, host: s.bindHost, node: s.node })),
    // The control port is bound on the control host, so it is probed and held there.
    hasCoordinator ? { nodeName: coordinator.nodeName, host: coordinator.controlHost, node: coordinator.node } : undefined,
  );
  // Another cluster launching at the same moment may have taken the HTTP port since this launch
  // looked (nothing listens on it until its coordinator starts): its record says so, and the
  // probes of this launch would otherwise be answered by that cluster's coordinator.
  const taken = await context.httpPortHolder?.(coordinator.nodeName, coordinator.bindHost, coordinator.httpPort);
  if (taken !== undefined) {
    throw new LaunchError(
      "PortInUse",
      "ports",
      `the coordinator's HTTP port ${joinHostPort(coordinator.bindHost, coordinator.httpPort)} on ${coordinator.nodeName} is held by cluster "${taken}", launched beside this one: give one of the two definitions another [coordinator] port`,
    );
  }
  const held = await context.heldPorts();
  held.push(ownHttpListener(coordinator.bindHost, coordinator.httpPort));
  const isTaken = async (node: NodeAccess, host: string, port: number): Promise<boolean> => {
    const inTable = await heldInTable(node, host, port);
    if (inTable === true) return true;
    if (readiness.stageUp !== "ring-log-line") return node.isPortOpen(host, port, 500);
    if (inTable === undefined) {
      throw new ShardctlError(
        "NodeCommandFailed",
        `node ${node.config.name}: cannot list its TCP sockets (with ss, lsof or netstat), by which a ring's ports are chosen without connecting to them: install one of them there`,
      );
    }
    return false;
  };
  let ports: number[];
  try {
    ports = await allocatePorts(request.portRange, requests, held, (host, port) => isTaken(requests.find((r) => r.host === host)!.node, host, port));
  } catch (error) {
    throw asLaunchError(error, "ports");
  }
  entry.ports = [
    ...request.stages.map((s, i) => ({ node: s.nodeName, host: s.bindHost, port: ports[i]!, purpose: "transport" as const })),
    ...(hasCoordinator ? [{ node: coordinator.nodeName, host: coordinator.controlHost, port: ports[request.stages.length]!, purpose: "control" as const }] : []),
    { node: coordinator.nodeName, host: coordinator.bindHost, port: coordinator.httpPort, purpose: "http" as const },
  ];
  return {
    cluster: request.cluster,
    modelName: request.modelName,
    maxSequences: request.maxSequences,
    ...(request.contextLength === undefined ? {} : { contextLength: request.contextLength }),
    transport: request.transport,
    explicitLayers: request.explicitLayers,
    stages: request.stages.map((s, i) => ({
      index: s.index,
      id: `stage-${s.index}`,
      address: { host: s.bindHost, port: ports[i]! },
      layers: s.layers,
      ...(s.threads === undefined ? {} : { threads: s.threads }),
    })),
    coordinator: {
      id: "coordinator",
      // The stages dial this address back (the HTTP host may be loopback or a wildcard). Without a
      // coordinator process it is never used: the HTTP one stands in.
      address: hasCoordinator ? { host: coordinator.controlHost, port: ports[request.stages.length]! } : { host: coordinator.bindHost, port: coordinator.httpPort },
      http: { host: coordinator.bindHost, port: coordinator.httpPort },
      // It holds no layers: one thread, whatever runs beside it.
      threads: 1,
    },
  };
}
