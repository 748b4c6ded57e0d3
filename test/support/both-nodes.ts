/**
 * A local node and a real SSH node (one sshd fixture node), for tests that run the same checks
 * against both kinds of node access.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { LocalNode, NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "./sshd.js";

export type NodeKind = "local" | "ssh";

export interface BothNodes {
  sshd: SshdSet;
  /** A node of each kind (the SSH one from a pool that keeps its connection). */
  node(kind: NodeKind): NodeAccess;
  /** Each node's model directory on this machine (the sshd node runs as this user here). */
  dir(kind: NodeKind): string;
  close(): Promise<void>;
}

/** Starts the sshd node and makes the local node's directory (`prefix` names it under the temp dir). */
export async function startBothNodes(prefix: string): Promise<BothNodes> {
  const sshd = await startSshdNodes({ count: 1 });
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
  const localDir = await mkdtemp(join(tmpdir(), prefix));
  return {
    sshd,
    node: (kind) => (kind === "ssh" ? pool.get(sshNodeConfig(sshd, 0)) : new LocalNode({ name: "local", host: "local", modelDir: localDir })),
    dir: (kind) => (kind === "ssh" ? sshd.nodes[0]!.modelDir : localDir),
    close: async () => {
      await pool.close();
      await sshd.close();
      await rm(localDir, { recursive: true, force: true });
    },
  };
}
