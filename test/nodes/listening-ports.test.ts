/**
 * The ports something listens on, read from a node's socket table on a local node and a real SSH
 * node, with each tool this machine has (ss, net-tools' netstat, lsof; macOS's netstat is not
 * here), never by connecting: a listener that takes its first connection as its peer (an MLX ring
 * rank waiting for its neighbour) must see none.
 */
import { createServer, type Server } from "node:net";
import { afterAll, beforeAll, describe, expect, it, test } from "vitest";
import { socketCovers, listeningSockets, type ListenerTool } from "../../src/nodes/index.js";
import { startBothNodes, type BothNodes } from "../support/both-nodes.js";
import { allocateHost } from "../support/test-world.js";

let both: BothNodes;
let server: Server;
let port: number;
let host: string;
let connections = 0;

beforeAll(async () => {
  both = await startBothNodes("shardctl-listening-");
  server = createServer(() => connections++);
  host = await allocateHost();
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
      const listeners = await listeningSockets(both.node(kind), tool === undefined ? {} : { tool });
      const ports = listeners === undefined ? undefined : new Set(listeners.map((l) => l.port));
      expect(ports?.has(port)).toBe(true);
      // The sshd the node is reached through listens too.
      expect(ports?.has(both.sshd.nodes[0]!.port)).toBe(true);
      expect(ports?.has(1)).toBe(false);
      // With its address: it holds that address's port, not another loopback address's.
      const listener = listeners?.find((l) => l.port === port);
      expect(listener).toEqual({ address: host, port });
      expect(socketCovers(listener!, host)).toBe(true);
      expect(socketCovers(listener!, "127.0.0.254")).toBe(false);
      expect(connections).toBe(0);
    },
  );
});

test("a listener on any address (as ss, net-tools, lsof and BSD netstat write it) holds every address's port", () => {
  for (const address of ["*", "0.0.0.0", "::"]) {
    expect(socketCovers({ address, port: 39600 }, "10.0.0.2")).toBe(true);
    expect(socketCovers({ address, port: 39600 }, "[fd00::2]")).toBe(true);
  }
  expect(socketCovers({ address: "fd00::2", port: 39600 }, "[fd00::2]")).toBe(true);
  expect(socketCovers({ address: "10.0.0.3", port: 39600 }, "10.0.0.2")).toBe(false);
  expect(socketCovers({ address: "10.0.0.3", port: 39600 }, undefined)).toBe(true);
});
