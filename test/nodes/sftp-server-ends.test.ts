/**
 * A node's SFTP server that ends on its own while the SSH connection stays up — killed at its
 * user's file size limit (`ulimit -f`: SIGXFSZ), or crashed — is a file error naming the likely
 * cause, not an unreachable node (a staging once retried such a push for ever as NodeUnreachable
 * while the node answered every command). A real sshd with Debian's external sftp-server, which
 * the test kills under a write.
 */
import { join } from "node:path";
import { readdir, readFile } from "node:fs/promises";
import { afterAll, beforeAll, expect, test } from "vitest";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

let set: SshdSet;
let pool: NodePool;
let node: NodeAccess;
let listener: number;

beforeAll(async () => {
  set = await startSshdNodes({ count: 1, sftp: "shell" });
  listener = set.nodes[0]!.pid!;
  pool = new NodePool({ knownHostsPath: set.knownHostsPath, sshConfigPath: join(set.root, "no-config") });
  node = pool.get(sshNodeConfig(set, 0));
}, 60_000);

afterAll(async () => {
  await pool?.close();
  await set?.close();
});

/**
 * The sftp-server processes this test's sshd started (its descendants), none of another's: read
 * from /proc in this process, which takes milliseconds where a `ps` may take a tenth of a second
 * on a loaded machine (a write may be over before it answers).
 */
async function sftpServersOfOurSshd(): Promise<number[]> {
  const rows: Array<{ pid: number; ppid: number; comm: string }> = [];
  for (const entry of await readdir("/proc")) {
    if (!/^\d+$/.test(entry)) continue;
    const stat = await readFile(`/proc/${entry}/stat`, "utf8").catch(() => "");
    // pid (comm) state ppid …: comm may hold spaces and parentheses, so split at its last ")".
    const close = stat.lastIndexOf(")");
    if (close < 0) continue;
    rows.push({ pid: Number(entry), comm: stat.slice(stat.indexOf("(") + 1, close), ppid: Number(stat.slice(close + 2).split(" ")[1]) });
  }
  const parent = new Map(rows.map((r) => [r.pid, r.ppid]));
  const descends = (pid: number): boolean => {
    for (let p = parent.get(pid); p !== undefined && p > 1; p = parent.get(p)) if (p === listener) return true;
    return false;
  };
  return rows.filter((r) => r.comm === "sftp-server" && descends(r.pid)).map((r) => r.pid);
}

test("the SFTP server killed under a write: NodeFileError saying it ended while the connection is up, and the node still answers", async () => {
  const file = join(set.nodes[0]!.modelDir, "big.bin");
  let settled = false;
  const writing = node
    .writeFile(file, Buffer.alloc(256 << 20, 7))
    .catch((e: unknown) => e as { reason?: string; message: string })
    .finally(() => (settled = true));
  let killed = false;
  while (!killed && !settled) {
    const servers = await sftpServersOfOurSshd();
    for (const pid of servers) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // Gone already.
      }
    }
    killed = servers.length > 0;
    if (!killed) await new Promise((r) => setTimeout(r, 10));
  }
  expect(killed, "the write was over before its SFTP server was seen").toBe(true);
  const failed = await writing;
  expect(failed).toMatchObject({ reason: "NodeFileError" });
  expect((failed as Error).message).toMatch(/the SFTP session ended while writing .*big\.bin, though the SSH connection is up: .*ulimit -f/);
  const answer = await node.run(["echo", "still here"]);
  expect(answer.stdout.trim()).toBe("still here");
}, 60_000);
