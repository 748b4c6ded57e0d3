import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

let sshd: SshdSet;
let pool: NodePool;
let node: NodeAccess;

beforeAll(async () => {
  // OpenSSH's default MaxSessions: what a real node allows per connection.
  sshd = await startSshdNodes({ count: 1, maxSessions: 10 });
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "none") });
  node = pool.get(sshNodeConfig(sshd, 0));
});

afterAll(async () => {
  await pool?.close();
  await sshd?.close();
});

it("keeps running commands next to more long-lived exit watchers than MaxSessions 10 allows on one connection", async () => {
  // 20 watches: they ride connections of their own (9 each), so commands and SFTP never starve.
  const started = await Promise.all(
    Array.from({ length: 20 }, (_, i) => node.startDetached(["sleep", "30"], { logFile: join(sshd.nodes[0]!.modelDir, `sleep-${i}.log`) })),
  );
  const watchers = started.map((p) => node.watchExit(p.pid, p.startTime));
  await node.stat(sshd.nodes[0]!.modelDir); // SFTP-free path; make sure watchers have their sessions
  const results = await Promise.all(Array.from({ length: 30 }, (_, i) => node.run(["echo", String(i)])));
  expect(results.map((r) => r.exitCode)).toEqual(Array.from({ length: 30 }, () => 0));
  expect((await node.readFile(join(sshd.nodes[0]!.modelDir, "sleep-0.log"))).length).toBe(0);
  for (const p of started) expect(await node.signal(p.pid, "SIGKILL", p.startTime)).toBe(true);
  await Promise.all(watchers);
});
