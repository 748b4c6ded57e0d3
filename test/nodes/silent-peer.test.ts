/**
 * A peer that takes the TCP connection and never speaks SSH (a half-dead host, a partition that
 * lets the SYN through, a tarpit): the handshake fails with NodeUnreachable at its deadline, and
 * the errors ssh2 reports after the first (the lost socket once the deadline closed it) never
 * reach the process as uncaught exceptions, which would end a daemon. Its words say that the TCP
 * connection was accepted and the SSH server said nothing (a hung sshd), not only that the
 * handshake timed out, which a host that is down or cut off does as well.
 */
import { createServer, type Server, type Socket } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool, probeNode } from "../../src/nodes/index.js";
import { generatePrivateKey } from "../support/ssh-key.js";

let server: Server;
let dir: string;
const open = new Set<Socket>();

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-silent-peer-"));
  await writeFile(join(dir, "id_ed25519"), generatePrivateKey(), { mode: 0o600 });
  // Accepts, says nothing, and drops the connection after 600 ms (past the 300 ms handshake deadline).
  server = createServer((socket) => {
    open.add(socket);
    socket.on("error", () => undefined);
    socket.on("close", () => open.delete(socket));
    setTimeout(() => socket.destroy(), 600).unref();
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
});

afterAll(async () => {
  for (const socket of open) socket.destroy();
  await new Promise((resolve) => server?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

it("a peer that never speaks SSH: NodeUnreachable at the handshake deadline, and no uncaught error after it", async () => {
  const uncaught: unknown[] = [];
  const record = (error: unknown): void => void uncaught.push(error);
  process.on("uncaughtException", record);
  const pool = new NodePool({ knownHostsPath: join(dir, "known_hosts"), sshConfigPath: join(dir, "none"), connectDeadlineMs: 300 });
  try {
    const address = server.address() as { port: number };
    const node = pool.get({
      name: "silent",
      host: "127.0.0.1",
      port: address.port,
      user: "nobody",
      identityFile: join(dir, "id_ed25519"),
      hostKeyPolicy: "accept-new",
      modelDir: dir,
    });
    await expect(node.run(["true"])).rejects.toMatchObject({ reason: "NodeUnreachable" });
    // The peer drops the socket at 600 ms: ssh2 reports it as a second error of that connection.
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(uncaught).toEqual([]);
    // The failed handshake's socket was closed by this side, not left to the peer.
    expect(open.size).toBe(0);
  } finally {
    process.off("uncaughtException", record);
    await pool.close();
  }
});

it("a peer that never speaks SSH: the probe and every question say the TCP connection was accepted and the SSH server said nothing, naming the node", async () => {
  const pool = new NodePool({ knownHostsPath: join(dir, "known_hosts"), sshConfigPath: join(dir, "none"), connectDeadlineMs: 300 });
  try {
    const address = server.address() as { port: number };
    const node = pool.get({
      name: "hung",
      host: "127.0.0.1",
      port: address.port,
      user: "nobody",
      identityFile: join(dir, "id_ed25519"),
      hostKeyPolicy: "accept-new",
      modelDir: dir,
    });
    const words = `node hung: cannot connect to 127.0.0.1:${address.port}: Timed out while waiting for handshake (the TCP connection was accepted, but the SSH server there did not complete its greeting and key exchange within 300 ms: its sshd hangs`;
    const probe = await probeNode(node, { deadlineMs: 5_000 });
    expect(probe.reachable).toBe(false);
    expect(probe.error).toContain(words);
    await expect(node.run(["true"])).rejects.toThrow(words);
  } finally {
    await pool.close();
  }
});
