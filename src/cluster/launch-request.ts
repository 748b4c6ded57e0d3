/** From a definition, its plan and where staging put the model, to a launch request. */
import { lookup } from "node:dns/promises";
import { isIP } from "node:net";
import { join, posix } from "node:path";
import { createDriver } from "../engines/index.js";
import { defaultDeadlines, type LaunchDeadlines, type LaunchRequest } from "../launch/index.js";
import { SshNode, type NodeAccess } from "../nodes/index.js";
import type { ShardPlan } from "../planner/index.js";
import type { ClusterSpec, Settings } from "../spec/index.js";
import { ShardctlError } from "../errors/index.js";
import { resolveHome } from "../staging/index.js";
import { controlNodeName, type ClusterNodes } from "./cluster-nodes.js";

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
  const stages = await Promise.all(
    plan.stages.map(async (stage, i) => {
      const node = nodes.stages[i]!;
      return {
        index: stage.index,
        nodeName: node.config.name,
        node,
        bindHost: await bindHostOf(node),
        layers: stage.layers,
        modelDir: modelPathOf(node),
        runDir: await runDirOf(node, spec.name, settings),
      };
    }),
  );
  const coordinatorNode = nodes.coordinator;
  return {
    cluster: spec.name,
    revision,
    driver: createDriver(spec.engine.kind, {
      extraArgs: spec.engine.extraArgs,
      ...(spec.engine.binary === undefined ? {} : { binary: spec.engine.binary }),
    }),
    transport: spec.transport.backend,
    portRange: spec.transport.portRange,
    stages,
    coordinator: {
      nodeName: coordinatorNode.config.name,
      node: coordinatorNode,
      bindHost: spec.coordinator.host,
      httpPort: spec.coordinator.port,
      modelDir: modelPathOf(coordinatorNode),
      runDir: await runDirOf(coordinatorNode, spec.name, settings),
    },
    explicitLayers: plan.splitUsed === "memory",
    modelName: spec.model.id,
    ...(spec.router.register ? { router: { backend: spec.router.backend, weight: spec.router.weight } } : {}),
    deadlines: { ...defaultDeadlines, ...deadlines },
  };
}

/**
 * The address a process on `node` binds and its peers dial: loopback for the control machine's
 * own nodes, the registry address otherwise (names resolved here: engines want IP addresses).
 */
async function bindHostOf(node: NodeAccess): Promise<string> {
  if (node.config.host === "local") return "127.0.0.1";
  // An ssh config alias names its machine by HostName: resolve that, not the alias.
  const host = node instanceof SshNode ? await node.targetHost() : node.config.host;
  if (isIP(host) !== 0) return host;
  try {
    return (await lookup(host)).address;
  } catch (error) {
    throw new ShardctlError(
      "NodeAddressUnresolved",
      `node ${node.config.name}: cannot resolve "${host}" to an IP address (engines need one): ${(error as Error).message}`,
      { cause: error },
    );
  }
}

/** Per-launch files live beside the node's models (the control machine: in the state directory). */
async function runDirOf(node: NodeAccess, cluster: string, settings: Settings): Promise<string> {
  if (node.config.name === controlNodeName) return join(settings.daemon.stateDir, "run", cluster);
  return posix.join(await resolveHome(node, node.config.modelDir), ".shardctl", "run", cluster);
}
