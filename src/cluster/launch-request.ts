/** From a definition, its plan and where staging put the model, to a launch request. */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { join, posix } from "node:path";
import { createDriver, engineOf, type EngineFacts } from "../engines/index.js";
import { defaultDeadlines, type LaunchDeadlines, type LaunchRequest } from "../launch/index.js";
import { isEveryInterface, SshNode, within, type NodeAccess } from "../nodes/index.js";
import type { ShardPlan } from "../planner/index.js";
import { isLinkLocalAddress, type ClusterSpec, type Settings } from "../spec/index.js";
import { ShardctlError } from "../errors/index.js";
import { resolveHome } from "../staging/index.js";
import { controlNodeName, type ClusterNodes } from "./cluster-nodes.js";
import { controlHostOf, isLoopbackHost } from "./control-host.js";
import { engineAddressOf } from "./engine-address.js";

export async function buildLaunchRequest(
  spec: ClusterSpec,
  settings: Settings,
  revision: string,
  plan: ShardPlan,
  nodes: ClusterNodes,
  modelPaths: ReadonlyMap<string, string>,
  deadlines: Partial<LaunchDeadlines> = {},
): Promise<LaunchRequest> {
  const modelPathOf = (node: NodeAccess): string => {
    const path = modelPaths.get(node.config.name);
    if (path === undefined) throw new ShardctlError("ModelNotStaged", `node ${node.config.name} has no staged model`);
    return path;
  };
  const threads = await threadsPerStage(nodes.stages);
  const { stageHosts, httpHost, nodeHost, controlHost } = await launchAddressesOf(spec, nodes);
  const stages = await Promise.all(
    plan.stages.map(async (stage, i) => {
      const node = nodes.stages[i]!;
      return {
        index: stage.index,
        nodeName: node.config.name,
        node,
        bindHost: stageHosts[i]!,
        layers: stage.layers,
        modelDir: modelPathOf(node),
        runDir: await runDirOf(node, spec.name, settings),
        ...(threads[i] === undefined ? {} : { threads: threads[i] }),
      };
    }),
  );
  const coordinatorNode = nodes.coordinator;
  refuseUnreachableHttpHost(coordinatorNode, nodeHost, httpHost);
  return {
    cluster: spec.name,
    revision,
    driver: createDriver(spec.engine.kind, {
      extraArgs: spec.engine.extraArgs,
      ...(spec.engine.binary === undefined ? {} : { binary: spec.engine.binary }),
      ...(spec.engine.python === undefined ? {} : { python: spec.engine.python }),
    }),
    transport: spec.transport.backend,
    portRange: spec.transport.portRange,
    stages,
    coordinator: {
      nodeName: coordinatorNode.config.name,
      node: coordinatorNode,
      bindHost: httpHost,
      ...(isEveryInterface(httpHost) ? { urlHost: await wildcardReachedAt(coordinatorNode, httpHost, nodeHost) } : {}),
      controlHost,
      httpPort: spec.coordinator.port,
      modelDir: modelPathOf(coordinatorNode),
      runDir: await runDirOf(coordinatorNode, spec.name, settings),
    },
    explicitLayers: plan.splitUsed === "memory",
    modelName: spec.model.id,
    maxSequences: spec.model.maxSequences,
    contextLength: spec.model.contextLength,
    // No router (`[router] kind = "none"`, the default): nothing to register, nor to claim registered.
    ...(routerBackendNameOf(spec, settings) === undefined ? {} : { router: { backend: spec.router.backend, weight: spec.router.weight } }),
    deadlines: loadDeadlines({ ...defaultDeadlines, ...deadlines }, spec.engine.loadTimeoutSeconds),
    ...(spec.engine.generationWatchdogSeconds === undefined ? {} : { generationWatchdogSeconds: spec.engine.generationWatchdogSeconds }),
    ...(spec.engine.healthSilenceSeconds === undefined ? {} : { healthSilenceSeconds: spec.engine.healthSilenceSeconds }),
  };
}

/** The addresses a launch binds: see `launchAddressesOf`. */
export interface LaunchAddresses {
  /** Per stage of `nodes.stages`, the address it binds (its transport port's). */
  stageHosts: string[];
  /** The address the HTTP server binds (`httpBindHostOf`). */
  httpHost: string;
  /** The address the coordinator's node binds as a stage would; the HTTP one without a coordinator process. */
  nodeHost: string;
  /** The coordinator's control address (its transport port's); the HTTP one without a coordinator process. */
  controlHost: string;
  /** Whether the engine runs a coordinator process (with a control port from the transport range). */
  hasCoordinator: boolean;
}

/** Where the launch's processes of `spec` on `nodes` bind, resolved as their launch resolves them. */
export async function launchAddressesOf(spec: ClusterSpec, nodes: ClusterNodes): Promise<LaunchAddresses> {
  const engine = engineOf(spec.engine.kind);
  const stageHosts = await Promise.all(nodes.stages.map((node) => bindHostOf(node, engine)));
  const httpHost = await httpBindHostOf(spec, nodes);
  // Where the last stage serves HTTP there is no coordinator process and no control address: the
  // HTTP server is that stage's, at its own address.
  const hasCoordinator = engine.readiness.httpServer === "coordinator";
  const nodeHost = hasCoordinator ? await bindHostOf(nodes.coordinator, engine) : httpHost;
  const controlHost = hasCoordinator ? await controlHostOf(nodes.coordinator, nodeHost, stageHosts) : httpHost;
  return { stageHosts, httpHost, nodeHost, controlHost, hasCoordinator };
}

/**
 * The launch's deadlines with `[engine] load_timeout_seconds` applied: every step that waits for the
 * model to load (a stage up, /health, the first token — mlx-lm loads only once its ring formed and
 * its /health answers) waits at least that long. A large model takes minutes to load.
 */
function loadDeadlines(deadlines: LaunchDeadlines, loadTimeoutSeconds: number | undefined): LaunchDeadlines {
  if (loadTimeoutSeconds === undefined) return deadlines;
  const least = loadTimeoutSeconds * 1000;
  return {
    ...deadlines,
    stageListenMs: Math.max(deadlines.stageListenMs, least),
    coordinatorHealthMs: Math.max(deadlines.coordinatorHealthMs, least),
    readinessMs: Math.max(deadlines.readinessMs, least),
  };
}

/**
 * Threads per stage when stages share a machine (nodes with the same registry `host`): each of k
 * stages gets ⌊cores ÷ k⌋, at least 1, the cores asked of the machine itself. A stage alone on
 * its machine gets undefined (the engine's default: every core), as does one whose machine does
 * not say.
 */
export async function threadsPerStage(stages: readonly NodeAccess[]): Promise<Array<number | undefined>> {
  const byMachine = new Map<string, number[]>();
  stages.forEach((node, i) => byMachine.set(node.config.host, [...(byMachine.get(node.config.host) ?? []), i]));
  const threads: Array<number | undefined> = stages.map(() => undefined);
  for (const indices of byMachine.values()) {
    if (indices.length < 2) continue;
    const cores = await coresOf(stages[indices[0]!]!);
    if (cores === undefined) continue;
    for (const i of indices) threads[i] = Math.max(1, Math.floor(cores / indices.length));
  }
  return threads;
}

/** The machine's online cores (POSIX getconf), or undefined when it does not answer. */
async function coresOf(node: NodeAccess): Promise<number | undefined> {
  try {
    const result = await node.run(["getconf", "_NPROCESSORS_ONLN"], { deadlineMs: 10_000 });
    const cores = Number(result.stdout.trim());
    return result.exitCode === 0 && Number.isInteger(cores) && cores > 0 ? cores : undefined;
  } catch {
    return undefined;
  }
}

/**
 * The daemon (its probes) and the router reach the HTTP server from the control machine: a
 * `[coordinator] host` on loopback is out of their reach on a node that is not loopback itself.
 */
function refuseUnreachableHttpHost(node: NodeAccess, nodeHost: string, httpHost: string): void {
  if (node.config.host === "local" || !isLoopbackHost(httpHost) || isLoopbackHost(nodeHost)) return;
  throw new ShardctlError(
    "CoordinatorHostUnreachable",
    `[coordinator] host ${httpHost} is the loopback of node ${node.config.name} (${nodeHost}), which the daemon and the router on the control machine cannot reach: set it to the node's address (${nodeHost}) or 0.0.0.0, or run the coordinator on the control machine ([coordinator] node = "local")`,
    { terminal: true },
  );
}

/**
 * Where a listener bound to a wildcard on `node` is dialled: the node's address, IPv4 for 0.0.0.0
 * (which takes no IPv6 connection; `::` takes both), found as the engines' IPv4 address is.
 */
async function wildcardReachedAt(node: NodeAccess, wildcard: string, nodeHost: string): Promise<string> {
  if (wildcard === "::" || isIP(nodeHost) !== 6) return nodeHost;
  return bindHostOf(node, { ...engineOf("reference"), ipv4Only: true }).catch(() => nodeHost);
}

/**
 * The address the cluster's HTTP server binds on its node (`nodes.coordinator`): `[coordinator]
 * host`, or for an engine whose last stage serves HTTP, the address that stage binds.
 */
export async function httpBindHostOf(spec: ClusterSpec, nodes: ClusterNodes): Promise<string> {
  const lastStage = nodes.stages.at(-1);
  const engine = engineOf(spec.engine.kind);
  return engine.readiness.httpServer === "last-stage" && lastStage !== undefined ? bindHostOf(lastStage, engine) : spec.coordinator.host;
}

/**
 * The address a process on `node` binds and its peers dial: loopback for the control machine's
 * own nodes, the registry address otherwise (names resolved here: engines want IP addresses).
 */
export async function bindHostOf(node: NodeAccess, engine: EngineFacts): Promise<string> {
  if (node.config.host === "local") return "127.0.0.1";
  // An ssh config alias names its machine by HostName: resolve that, not the alias.
  const target = node instanceof SshNode ? await node.targetHost() : node.config.host;
  const host = isIP(target) === 0 ? target : engineAddressOf(node.config.name, target);
  if (isIP(host) === 6 && engine.ipv4Only === true) {
    throw new ShardctlError(
      "NodeAddressNotIPv4",
      `node ${node.config.name}: ${engine.name} connects its processes over IPv4 only, and its host is the IPv6 address ${host}: register the node by an IPv4 address or a name that resolves to one`,
      { terminal: true },
    );
  }
  if (isIP(host) !== 0) return host;
  // A name with several addresses: the one SSH reached is the node's (the resolver's first may be
  // another machine's, or none at all); for an IPv4-only engine, an IPv4 one.
  // Bounded (2 s): a node silent now is not waited for here; its launch finds out.
  const reached =
    node instanceof SshNode
      ? await within(
          2_000,
          node.reachedAddress().catch(() => undefined),
          undefined,
        )
      : undefined;
  // A link-local one (an mDNS name over a cable between two machines) means nothing to the engines
  // on the others: then the name's other addresses.
  const usable = reached === undefined || isIP(reached) === 0 || isZoned(reached) ? undefined : engineAddressOf(node.config.name, reached);
  if (usable !== undefined && (engine.ipv4Only !== true || isIP(usable) === 4)) return usable;
  let resolved: string[];
  try {
    // An engine that takes IPv4 only is given the name's IPv4 address, whatever the resolver lists first.
    resolved = (await lookup(host, { all: true, ...(engine.ipv4Only === true ? { family: 4 } : {}) })).map((a) => a.address);
  } catch (error) {
    throw new ShardctlError(
      "NodeAddressUnresolved",
      `node ${node.config.name}: cannot resolve "${host}" to an IP address (engines need one): ${(error as Error).message}`,
      { cause: error },
    );
  }
  // Refused (NodeAddressUnusable) only when the name has no other address.
  return engineAddressOf(node.config.name, resolved.find((address) => !isZoned(address)) ?? resolved[0]!);
}

/** A link-local address, or one with a zone: usable on one machine only. */
function isZoned(address: string): boolean {
  return address.includes("%") || isLinkLocalAddress(address);
}

/** Per-launch files live beside the node's models (the control machine: in the state directory). */
export async function runDirOf(node: NodeAccess, cluster: string, settings: Settings): Promise<string> {
  if (node.config.name === controlNodeName) return join(settings.daemon.stateDir, "run", cluster);
  return posix.join(await resolveHome(node, node.config.modelDir), ".shardctl", "run", cluster);
}

/** The router backend name a cluster registers under; undefined when it registers nowhere (`[router] kind = "none"`, the default, or `register = false`). */
export function routerBackendNameOf(spec: ClusterSpec, settings: Settings): string | undefined {
  return spec.router.register && settings.router.kind !== "none" ? spec.router.backend : undefined;
}
