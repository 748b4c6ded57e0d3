/**
 * A peer that takes the TCP connection and never speaks SSH (a half-dead host, a partition that
 * lets the SYN through, a tarpit): the handshake fails with NodeUnreachable at its deadline, and
 * the errors ssh2 reports after the first (the lost socket once the deadline closed it) never
 * reach the process as uncaught exceptions, which would end a daemon.
 */
import { createServer, type Server, type Socket } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool } from "../../src/nodes/index.js";
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
