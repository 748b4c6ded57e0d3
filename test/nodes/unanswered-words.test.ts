/**
 * A question to a node that gets no answer because no connection could be made says why: a
 * question whose deadline runs out while its connection waits out the back-off after a refused
 * attempt (a node whose sshd is stopped) names the refusal, so a status that waits on the node
 * tells an sshd that is down from a node that is silent, instead of saying only "timed out". One
 * whose connection drops mid-command says it got no answer.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { commandFailed, NodePool } from "../../src/nodes/index.js";
import { freePort } from "../support/free-ports.js";
import { generatePrivateKey } from "../support/ssh-key.js";
import { sshNodeConfig, startSshdNodes } from "../support/sshd.js";

let dir: string;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-unanswered-"));
  await writeFile(join(dir, "id_ed25519"), generatePrivateKey(), { mode: 0o600 });
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

it("a question whose deadline runs out before a connection could be made names the last failed attempt (connection refused)", async () => {
  const pool = new NodePool({ knownHostsPath: join(dir, "known_hosts"), sshConfigPath: join(dir, "none") });
  try {
    // Nothing listens on the port: every connection attempt is refused at once.
    const port = await freePort();
    const node = pool.get({ name: "down", host: "127.0.0.1", port, user: "nobody", identityFile: join(dir, "id_ed25519"), hostKeyPolicy: "accept-new", modelDir: dir });
    await expect(node.run(["true"])).rejects.toMatchObject({
      reason: "NodeUnreachable",
      message: expect.stringContaining(
        `ECONNREFUSED 127.0.0.1:${port} (nothing listens on port ${port} there: is sshd running, and is the port right, in [nodes.down] or the ssh config?)`,
      ),
    });
    // The next attempt waits out the back-off (250 ms after one failure): a 100 ms question ends first.
    const error = await node.processStartTime(1, { deadlineMs: 100 }).catch((e: unknown) => e);
    expect(error).toMatchObject({ reason: "NodeUnreachable" });
    expect((error as Error).message).toMatch(
      /^node down: read a process start time timed out after \d+ ms: no connection to the node \(the last attempt: .*ECONNREFUSED/,
    );
    expect((error as Error).message.match(/node down/g), "the node named once").toHaveLength(1);
  } finally {
    await pool.close();
  }
});

it("a command whose connection drops before it says how it ended is said to have got no answer, not to have exited with undefined", async () => {
  const sshd = await startSshdNodes({ count: 1 });
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none") });
  try {
    const node = pool.get(sshNodeConfig(sshd, 0));
    expect((await node.run(["true"])).exitCode).toBe(0);
    // The node goes down under the question: its connection's sshd process ends mid-command.
    const asked = node.run(["sleep", "5"], { deadlineMs: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 500));
    await sshd.nodes[0]!.stop({ connections: true });
    const result = await asked;
    expect(result).toMatchObject({ timedOut: false, exitCode: undefined, signal: undefined });
    expect(commandFailed("n", "NodeUnreachable", "remove a log", result).message).toBe(
      "node n: remove a log got no answer: it ended without saying how (its connection to the node dropped, or it could not be started)",
    );
  } finally {
    await pool.close();
    await sshd.close();
  }
}, 30_000);
