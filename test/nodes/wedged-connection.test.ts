/**
 * An SSH connection that is up (its keepalives answered) but on which no command starts: here a
 * real sshd whose sessions are forced into `sleep` (ForceCommand), as an sshd wedged after
 * authentication, or a node-side hang tied to that one connection, leaves them. Nothing drops such a
 * connection by itself: once it has failed a few commands in a row and started none for 10 s, it is
 * retired, so when the node's sshd works again the next question opens a fresh connection and is
 * answered, instead of every question running out of its deadline for ever.
 */
import { execFile } from "node:child_process";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

const run = promisify(execFile);
let sshd: SshdSet;
let pool: NodePool;
let node: NodeAccess;

beforeAll(async () => {
  sshd = await startSshdNodes({ count: 1 });
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none") });
  node = pool.get(sshNodeConfig(sshd, 0));
});

afterAll(async () => {
  await pool?.close();
  await sshd?.close();
  // The forced sleeps the wedged sessions started (each is this sshd's, under its marker).
  await run("pkill", ["-f", "sleep 3599"]).catch(() => undefined);
});

it("a connection on which no command starts is given up for a fresh one, which is answered once the node's sshd works", async () => {
  const server = sshd.nodes[0]!;
  expect((await node.run(["echo", "up"], { deadlineMs: 5_000 })).stdout).toBe("up\n");
  // The node's sshd now forces every session into a sleep; the connection is made again under it.
  await server.stop({ connections: true });
  await server.start(["ForceCommand=sleep 3599"]);
  const wedged = await node.run(["echo", "wedged"], { deadlineMs: 1_000 });
  expect(wedged.timedOut).toBe(true);
  // The sshd works again for new connections; the one made above still forces its sessions.
  await server.stop();
  await server.start();
  const started = Date.now();
  let answered: string | undefined;
  while (answered === undefined && Date.now() - started < 40_000) {
    // A question asked as the wedged connection is given up fails with it (NodeUnreachable): asked again.
    const result = await node.run(["echo", "back"], { deadlineMs: 1_000 }).catch(() => undefined);
    if (result !== undefined && !result.timedOut && result.exitCode === 0) answered = result.stdout;
    else await new Promise((resolve) => setTimeout(resolve, 500));
  }
  expect(answered).toBe("back\n");
}, 90_000);
