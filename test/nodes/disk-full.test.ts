/**
 * A write that fills the disk fails with the file system's error and leaves nothing behind: no
 * partial temp file (a stat cache or a token half-written by a full disk used to stay as a 0-byte
 * `.tmp`), and the previous content of the file untouched. The full disk is a real 64 KiB tmpfs
 * (mounted as root), written by a local node and over SFTP by a real sshd node.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalNode, NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

const run = promisify(execFile);
let sshd: SshdSet;
let pool: NodePool;
let small: string;
const nodes: Record<string, () => NodeAccess> = {};

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("this test mounts a small tmpfs: run it as root");
  small = await mkdtemp(join(tmpdir(), "shardctl-full-disk-"));
  await run("mount", ["-t", "tmpfs", "-o", "size=64k", "tmpfs", small]);
  sshd = await startSshdNodes({ count: 1 });
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(sshd.root, "no-config") });
  nodes.ssh = () => pool.get(sshNodeConfig(sshd, 0));
  nodes.local = () => new LocalNode({ name: "local", host: "local", modelDir: small });
});

afterAll(async () => {
  await pool?.close();
  await sshd?.close();
  if (small !== undefined) {
    await run("umount", [small]).catch(() => undefined);
    await rm(small, { recursive: true, force: true });
  }
});

describe.each(["local", "ssh"])("%s node, a full disk", (kind) => {
  it("writeFile fails, leaves no temp file and keeps the old content", async () => {
    const file = join(small, `${kind}-cache.json`);
    await writeFile(file, "old");
    await expect(nodes[kind]!().writeFile(file, Buffer.alloc(256 * 1024, 1))).rejects.toThrow();
    expect((await readdir(small)).filter((name) => name.endsWith(".tmp"))).toEqual([]);
    expect(await readFile(file, "utf8")).toBe("old");
    await rm(file);
  });
});
