/**
 * The ports something listens on, read from a node's socket table on a local node and a real SSH
 * node, with each tool this machine has (ss, net-tools' netstat, lsof; macOS's netstat is not
 * here), never by connecting: a listener that takes its first connection as its peer (an MLX ring
 * rank waiting for its neighbour) must see none.
 */
import { createServer, type Server } from "node:net";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listeningPorts, LocalNode, NodePool, type ListenerTool, type NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";
import { allocateHost } from "../support/test-world.js";

let sshd: SshdSet;
let pool: NodePool;
let localDir: string;
let server: Server;
let port: number;
let connections = 0;
const nodes: Record<string, () => NodeAccess> = {};

beforeAll(async () => {
  sshd = await startSshdNodes({ count: 1 });
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
  localDir = await mkdtemp(join(tmpdir(), "shardctl-listening-"));
  nodes.ssh = () => pool.get(sshNodeConfig(sshd, 0));
  nodes.local = () => new LocalNode({ name: "local", host: "local", modelDir: localDir });
  server = createServer(() => connections++);
  const host = await allocateHost();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  port = (server.address() as { port: number }).port;
}, 60_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await pool?.close();
  await sshd?.close();
  if (localDir) await rm(localDir, { recursive: true, force: true });
});

describe.each(["local", "ssh"])("%s node", (kind) => {
  it.each<ListenerTool | undefined>([undefined, "ss", "netstat", "lsof"])(
    "lists a listener's port without connecting to it, and not a port nothing listens on (tool: %s)",
    async (tool) => {
      const ports = await listeningPorts(nodes[kind]!(), tool === undefined ? {} : { tool });
      expect(ports?.has(port)).toBe(true);
      // The sshd the node is reached through listens too.
      expect(ports?.has(sshd.nodes[0]!.port)).toBe(true);
      expect(ports?.has(1)).toBe(false);
      expect(connections).toBe(0);
    },
  );
});
