/**
 * The ports something listens on, read from a node's socket table on a local node and a real SSH
 * node, with each tool this machine has (ss, net-tools' netstat, lsof; macOS's netstat is not
 * here), never by connecting: a listener that takes its first connection as its peer (an MLX ring
 * rank waiting for its neighbour) must see none.
 */
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { listeningPorts, type ListenerTool } from "../../src/nodes/index.js";
import { startBothNodes, type BothNodes } from "../support/both-nodes.js";
import { allocateHost } from "../support/test-world.js";

let both: BothNodes;
let server: Server;
let port: number;
let connections = 0;

beforeAll(async () => {
  both = await startBothNodes("shardctl-listening-");
  server = createServer(() => connections++);
  const host = await allocateHost();
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  port = (server.address() as { port: number }).port;
}, 60_000);

afterAll(async () => {
  await new Promise((resolve) => server?.close(resolve));
  await both?.close();
});

describe.each(["local", "ssh"] as const)("%s node", (kind) => {
  it.each<ListenerTool | undefined>([undefined, "ss", "netstat", "lsof"])(
    "lists a listener's port without connecting to it, and not a port nothing listens on (tool: %s)",
    async (tool) => {
      const ports = await listeningPorts(both.node(kind), tool === undefined ? {} : { tool });
      expect(ports?.has(port)).toBe(true);
      // The sshd the node is reached through listens too.
      expect(ports?.has(both.sshd.nodes[0]!.port)).toBe(true);
      expect(ports?.has(1)).toBe(false);
      expect(connections).toBe(0);
    },
  );
});
