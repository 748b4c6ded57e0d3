/**
 * The nodes of a cluster: from the registry's NodeEntry to what node access needs, the control
 * machine as a node (the coordinator's default), and one pool every command and the daemon share.
 */
import { join } from "node:path";
import { NodePool, type NodeAccess, type NodeConfig } from "../nodes/index.js";
import { controlNodeName, type ClusterSpec, type NodeEntry, type Settings } from "../spec/index.js";
import { ShardctlError } from "../errors/index.js";

/** Where one launch runs: a node per stage, in stage order, and the coordinator's node. */
export interface ClusterNodes {
  stages: NodeAccess[];
  coordinator: NodeAccess;
}

export { controlNodeName };

export function nodeConfigOf(entry: NodeEntry): NodeConfig {
  return {
    name: entry.name,
    host: entry.local ? "local" : entry.host,
    port: entry.port,
    hostKeyPolicy: entry.hostKeyPolicy,
    modelDir: entry.modelDir,
    ...(entry.user === undefined ? {} : { user: entry.user }),
    ...(entry.identityFile === undefined ? {} : { identityFile: entry.identityFile }),
    ...(entry.memory === undefined ? {} : { memoryBytes: entry.memory }),
    ...(entry.memoryLimit === undefined ? {} : { memoryLimitBytes: entry.memoryLimit }),
    ...(entry.accelerator === undefined ? {} : { accelerator: entry.accelerator }),
    ...(entry.engineVersion === undefined ? {} : { engineVersion: entry.engineVersion }),
  };
}

/** The control machine (the coordinator's default node); its models live in the state directory. */
export function controlNodeConfig(settings: Settings): NodeConfig {
  return { name: controlNodeName, host: "local", port: 22, hostKeyPolicy: "strict", modelDir: join(settings.daemon.stateDir, "models") };
}

/** The node config of a ledger/spec node name: a registry node or the control machine. */
export function nodeConfigNamed(name: string, settings: Settings): NodeConfig | undefined {
  if (name === controlNodeName) return controlNodeConfig(settings);
  const entry = settings.nodes[name];
  return entry === undefined ? undefined : nodeConfigOf(entry);
}

/** The node pool every command and the daemon share: SSH checked against the settings' known_hosts and config. */
export function createNodePool(settings: Settings): NodePool {
  return new NodePool(sshOptionsOf(settings));
}

/** The OpenSSH client files `settings` name, for connections: known_hosts and the ssh config. */
export function sshOptionsOf(settings: Settings): { knownHostsPath?: string; sshConfigPath?: string } {
  return {
    ...(settings.ssh.knownHosts === undefined ? {} : { knownHostsPath: settings.ssh.knownHosts }),
    ...(settings.ssh.config === undefined ? {} : { sshConfigPath: settings.ssh.config }),
  };
}

/** The nodes of a definition, from `pool` (validation guarantees every name is in the registry). */
export function nodesOfCluster(spec: ClusterSpec, settings: Settings, pool: NodePool): ClusterNodes {
  const configOf = (name: string): NodeConfig => {
    const config = nodeConfigNamed(name, settings);
    if (config === undefined) throw new ShardctlError("UnknownNode", `${spec.file}: node "${name}" is not in the registry of ${settings.file}`, { terminal: true });
    return config;
  };
  return { stages: spec.nodes.map((n) => pool.get(configOf(n))), coordinator: pool.get(configOf(spec.coordinator.node)) };
}
