/**
 * A pushed model whose file names are shell syntax (command substitution, quotes, globs, a
 * leading dash…) is staged over SFTP and SSH to a real sshd node name for name, and no
 * name is ever run: the canary a substitution would create never appears. A backslash is refused
 * with a clear error (a Windows separator, never a portable model file name).
 */
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, readdir, rm, writeFile } from "node:fs/promises";
import { homedir, tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool } from "../../src/nodes/index.js";
import { hashLocalManifest, snapshotDir, stageNode } from "../../src/staging/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

let sshd: SshdSet;
let pool: NodePool;
let root: string;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-hostile-names-"));
  sshd = await startSshdNodes({ count: 1 });
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(root, "no-ssh-config") });
});

afterAll(async () => {
  await pool?.close();
  await sshd?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

it("stages every shell-syntax file name of a push source as itself, and runs none of them", async () => {
  // A substitution would create this file in the shell's working directory, wherever that is.
  const canary = `shardctl-canary-${process.pid}-${Date.now()}`;
  const names = [
    `$(touch ${canary}).json`,
    `\`touch ${canary}\`.json`,
    "a;b.json",
    "it's.json",
    'a"b.json',
    "x|y&z.json",
    "sp ace.json",
    "-n.json",
    "star*.json",
    "$HOME.json",
    "{a,b}.json",
    "~tilde.json",
    "#hash.json",
    "!bang.json",
  ];
  const dir = join(root, "push");
  await mkdir(dir);
  for (const name of names) await writeFile(join(dir, name), name);
  const manifest = await hashLocalManifest(dir, "org/hostile");
  const n = sshd.nodes[0]!;
  const modelDir = join(n.modelDir, "hostile");
  const node = pool.get(sshNodeConfig(sshd, 0, { modelDir }));
  const result = await stageNode(node, { kind: "push", dir, repo: "org/hostile" }, manifest, { files: "all" });
  expect(result.filesTransferred).toBe(names.length);
  expect((await readdir(snapshotDir(modelDir, "org/hostile", manifest.commit))).sort()).toEqual([...names].sort());
  // Staged again: every file is found present, by the same names.
  expect((await stageNode(node, { kind: "push", dir, repo: "org/hostile" }, manifest, { files: "all" })).filesTransferred).toBe(0);
  for (const where of [process.cwd(), homedir(), tmpdir(), root, sshd.root, n.modelDir]) expect(existsSync(join(where, canary)), where).toBe(false);

  await writeFile(join(dir, "back\\slash.json"), "x");
  await expect(hashLocalManifest(dir, "org/hostile")).rejects.toMatchObject({ reason: "UnsafeFileName", message: expect.stringContaining("backslash") });
});
