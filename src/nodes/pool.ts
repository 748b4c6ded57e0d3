/**
 * One connection per node, shared by every cluster: the SSH connection is opened once and
 * multiplexed. A node whose address, user, port, key or policy changes gets a fresh connection; other
 * changes (model_dir, memory…) get a new view over the same connection.
 */
import { LocalNode } from "./local-node.js";
import { SshNode } from "./ssh/ssh-node.js";
import type { SshOptions } from "./ssh/ssh-connection.js";
import type { NodeAccess, NodeConfig } from "./types.js";

export class NodePool {
  private readonly nodes = new Map<string, { connectionKey: string; configKey: string; access: NodeAccess }>();

  constructor(private readonly options: SshOptions = {}) {}

  get(config: NodeConfig): NodeAccess {
    const connectionKey = JSON.stringify([config.host, config.user, config.port, config.identityFile, config.hostKeyPolicy]);
    const configKey = JSON.stringify(config);
    const existing = this.nodes.get(config.name);
    if (existing !== undefined && existing.configKey === configKey) return existing.access;
    let access: NodeAccess;
    if (existing !== undefined && existing.connectionKey === connectionKey && existing.access instanceof SshNode) {
      access = new SshNode(config, this.options, existing.access.connection);
    } else {
      if (existing !== undefined) void existing.access.close();
      access = createNodeAccess(config, this.options);
    }
    this.nodes.set(config.name, { connectionKey, configKey, access });
    return access;
  }

  async close(): Promise<void> {
    const all = [...this.nodes.values()];
    this.nodes.clear();
    await Promise.all(all.map((n) => n.access.close()));
  }
}

/** `host = "local"` is the control node itself; anything else is reached over SSH. */
export function createNodeAccess(config: NodeConfig, options: SshOptions = {}): NodeAccess {
  return (config.local ?? config.host === "local") ? new LocalNode(config) : new SshNode(config, options);
}
