/**
 * Review findings on staging: resuming against a server that ignores Range, two passes staging the
 * same blob at once, push sources made of symlinks, which small files every node gets, and an
 * unknown free-disk figure.
 */
import { copyFile, mkdir, mkdtemp, readdir, readFile, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalNode, NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/index.js";
import {
  blobPath,
  classifyNode,
  fetchHubManifest,
  hashLocalManifest,
  incompletePath,
  isModelMetadataFile,
  maxModelMetadataFiles,
  snapshotDir,
  stageFileList,
  stageNode,
  type Manifest,
  type StagingSource,
} from "../../src/staging/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

const repo = "test-org/review-llama";
const commit = "fedcba9876543210fedcba9876543210fedcba98";
const shard1 = "model-00001-of-00002.safetensors";
const shard2 = "model-00002-of-00002.safetensors";

let sshd: SshdSet;
let hub: HubServer;
let pools: NodePool[] = [];
let root: string;
let modelDir: string;
let hubSource: StagingSource;
let manifest: Manifest;
let counter = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-staging-review-"));
  modelDir = join(root, "model");
  await makeTestModel(modelDir, { layers: 4, hidden: 256, intermediate: 1024, vocab: 1024, shards: 2, seed: 5 });
  [sshd, hub] = await Promise.all([startSshdNodes({ count: 1 }), startHubServer({ repos: [{ repo, commit, dir: modelDir }] })]);
  pools = [0, 1].map(() => new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(root, "no-ssh-config") }));
  hubSource = { kind: "hub", endpoint: hub.endpoint, repo, revision: "main" };
  manifest = await fetchHubManifest({ endpoint: hub.endpoint, repo, revision: "main" });
});

afterAll(async () => {
  for (const pool of pools) await pool.close();
  await hub?.close();
  await sshd?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

/** The sshd node through pool `p`, model dir `dir` (default: a fresh one). */
function sshNode(dir = join(sshd.nodes[0]!.modelDir, `r${++counter}`), p = 0): NodeAccess {
  return pools[p]!.get(sshNodeConfig(sshd, 0, { modelDir: dir }));
}

function localNode(): NodeAccess {
  return new LocalNode({ name: "local", host: "local", modelDir: join(root, `local-${++counter}`) });
}

async function expectSameBytes(a: string, b: string): Promise<void> {
  const [x, y] = await Promise.all([readFile(a), readFile(b)]);
  expect(x.length).toBe(y.length);
  expect(x.equals(y)).toBe(true);
}

describe("a Hub endpoint that ignores Range", () => {
  it("restarts a partial download on an ssh node from 0 instead of failing every pass", async () => {
    const noRange = await startHubServer({ repos: [{ repo, commit, dir: modelDir }], ignoreRange: true });
    try {
      const node = sshNode();
      const sha = await hub.sha256Of(repo, shard2);
      const content = await readFile(join(modelDir, shard2));
      const partial = incompletePath(node.config.modelDir, repo, sha);
      await mkdir(join(partial, ".."), { recursive: true });
      await writeFile(partial, content.subarray(0, 100_000));
      const source: StagingSource = { kind: "hub", endpoint: noRange.endpoint, repo, revision: "main" };
      const result = await stageNode(node, source, manifest, { files: [shard2], attempts: 1 });
      expect(result.filesTransferred).toBe(1);
      await expectSameBytes(blobPath(node.config.modelDir, repo, sha), join(modelDir, shard2));
      expect(await node.stat(partial)).toBeUndefined();
      const layout = { kind: "cache" as const, modelDir: node.config.modelDir };
      expect((await classifyNode(node, { ...manifest, files: manifest.files.filter((f) => f.path === shard2) }, layout, { verify: "full" })).state).toBe("present");
    } finally {
      await noRange.close();
    }
  });
});

describe("two passes staging the same model on one node at once", () => {
  it("transfers each blob once and both succeed", async () => {
    const dir = join(sshd.nodes[0]!.modelDir, `shared-${++counter}`);
    // Two connections (two pools) to the same machine: the lock is per machine, not per object.
    const [a, b] = [sshNode(dir, 0), sshNode(dir, 1)];
    hub.resetStats();
    const results = await Promise.all([stageNode(a, hubSource, manifest), stageNode(b, hubSource, manifest)]);
    expect(results.map((r) => r.modelPath)).toEqual([snapshotDir(dir, repo, commit), snapshotDir(dir, repo, commit)]);
    for (const file of manifest.files) expect(hub.stats().requestsByPath[`/${repo}/resolve/${commit}/${file.path}`]).toBe(1);
    expect(results[0]!.filesTransferred + results[1]!.filesTransferred).toBe(manifest.files.length);
    const total = manifest.files.reduce((s, f) => s + f.size, 0);
    expect(hub.stats().bytesServed).toBe(total);
    expect((await classifyNode(a, manifest, { kind: "cache", modelDir: dir }, { verify: "full" })).state).toBe("present");
    await expectSameBytes(join(snapshotDir(dir, repo, commit), shard1), join(modelDir, shard1));
    expect((await readdir(join(dir, "models--test-org--review-llama", "blobs"))).filter((n) => n.includes(".incomplete") || n.endsWith(".tmp"))).toEqual([]);
  });
});

describe("a blob another shardctl process stages on the node", () => {
  it("is waited for, said as such in the progress with who holds it, then staged", async () => {
    const node = localNode();
    const dir = node.config.modelDir;
    const shard = manifest.files.find((f) => f.path === shard1)!;
    // The lock another process holds while it writes the blob there (as node-lock.ts leaves it).
    const lock = `${blobPath(dir, repo, shard.hash)}.lock`;
    await mkdir(lock, { recursive: true });
    await writeFile(join(lock, "holder"), "shardctl (pid 4242 on ctl-2)\n");
    const events: Array<{ phase: string; file?: string; holder?: string }> = [];
    const staging = stageNode(node, hubSource, manifest, { onProgress: (e) => events.push(e) });
    while (!events.some((e) => e.phase === "waiting")) await new Promise((r) => setTimeout(r, 50));
    expect(events.find((e) => e.phase === "waiting")).toMatchObject({ file: shard1, holder: "shardctl (pid 4242 on ctl-2)" });
    // That process is done (without the file, here): the lock goes, and this staging goes on.
    await rm(lock, { recursive: true });
    const result = await staging;
    await expectSameBytes(join(result.modelPath, shard1), join(modelDir, shard1));
  });
});

describe("push sources", () => {
  it("follows an HF-cache snapshot of symlinks and stages its files", async () => {
    const cache = join(root, `hf-cache-${++counter}`, "models--test-org--review-llama");
    const snap = join(cache, "snapshots", commit);
    await mkdir(join(cache, "blobs"), { recursive: true });
    await mkdir(snap, { recursive: true });
    const plain = await hashLocalManifest(modelDir, repo);
    for (const file of plain.files) {
      await copyFile(join(modelDir, file.path), join(cache, "blobs", file.hash));
      await symlink(`../../blobs/${file.hash}`, join(snap, file.path));
    }
    const linked = await hashLocalManifest(snap, repo);
    expect(linked.files).toEqual(plain.files);
    const node = localNode();
    const result = await stageNode(node, { kind: "push", dir: snap, repo }, linked);
    expect(result.filesTransferred).toBe(plain.files.length);
    await expectSameBytes(join(result.modelPath, shard2), join(modelDir, shard2));
  });

  it("refuses links to non-files and an empty source, naming the directory", async () => {
    const dir = join(root, `bad-push-${++counter}`);
    await mkdir(join(dir, "sub"), { recursive: true });
    await writeFile(join(dir, "config.json"), "{}");
    await symlink("sub", join(dir, "linked-dir"));
    await expect(hashLocalManifest(dir, repo)).rejects.toMatchObject({ reason: "PushSourceInvalid", message: expect.stringContaining("linked-dir") });
    await rm(join(dir, "linked-dir"));
    await symlink("nowhere", join(dir, "dangling.json"));
    await expect(hashLocalManifest(dir, repo)).rejects.toMatchObject({ reason: "PushSourceInvalid", message: expect.stringContaining("dangling.json") });

    const empty = join(root, `empty-push-${++counter}`);
    await mkdir(join(empty, "nested"), { recursive: true });
    await expect(hashLocalManifest(empty, repo)).rejects.toMatchObject({ reason: "PushSourceEmpty", message: expect.stringContaining(empty) });
  });
});

describe("which small files every node gets", () => {
  it("classifies config, tokenizer, index and template files as metadata, and nothing else", () => {
    for (const yes of [
      "config.json",
      "generation_config.json",
      "tokenizer.json",
      "tokenizer_config.json",
      "model.safetensors.index.json",
      "tokenizer.model",
      "vocab.txt",
      "merges.txt",
      "chat_template.jinja",
      "cl100k.tiktoken",
      "sub/config.json",
    ]) {
      expect(isModelMetadataFile(yes), yes).toBe(true);
    }
    for (const no of [
      "README.md",
      ".gitattributes",
      "LICENSE",
      "README.txt",
      "consolidated.00.pth",
      "pytorch_model.bin",
      "model.gguf",
      "figure.png",
      "original/params.json",
      "original/tokenizer.model",
      shard1,
    ]) {
      expect(isModelMetadataFile(no), no).toBe(false);
    }
  });

  it("a listing of more small files than any model has is refused before anything is staged (TooManyModelFiles)", () => {
    const file = (path: string) => ({ path, size: 2, hash: "0".repeat(40), hashAlgo: "git-sha1" as const });
    const files = Array.from({ length: maxModelMetadataFiles + 1 }, (_, i) => file(`d/x${String(i).padStart(5, "0")}.json`));
    const manifest = { repo: "org/many", revision: "main", commit: "1".repeat(40), files };
    expect(() => stageFileList(manifest, [])).toThrow(
      expect.objectContaining({
        reason: "TooManyModelFiles",
        message: expect.stringMatching(/^org\/many: lists 1001 small files every node would get .*at most 1000 are staged/),
      }),
    );
    expect(stageFileList({ ...manifest, files: files.slice(1) }, [])).toHaveLength(maxModelMetadataFiles);
  });

  it("a stage node gets its shard and the metadata, not READMEs, images or other checkpoints", async () => {
    const dir = join(root, `extra-files-${++counter}`);
    await mkdir(join(dir, "original"), { recursive: true });
    for (const name of await readdir(modelDir)) await copyFile(join(modelDir, name), join(dir, name));
    await writeFile(join(dir, "README.md"), "# a model\n");
    await writeFile(join(dir, ".gitattributes"), "*.safetensors filter=lfs\n");
    await writeFile(join(dir, "consolidated.00.pth"), Buffer.alloc(4096, 7));
    await writeFile(join(dir, "original", "params.json"), "{}");
    const source: StagingSource = { kind: "push", dir, repo };
    const pushed = await hashLocalManifest(dir, repo);
    const wanted = stageFileList(pushed, [shard1]);
    expect(wanted).toEqual([shard1, "config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"].sort());
    const result = await stageNode(localNode(), source, pushed, { files: wanted });
    expect((await readdir(result.modelPath)).sort()).toEqual(wanted);
  });
});

describe("the free-disk check", () => {
  it("refuses when the probe cannot tell the free space, unless nothing needs transferring", async () => {
    // A machine without df: the same tools as here, minus df.
    const bin = join(root, `bin-without-df-${++counter}`);
    await mkdir(bin);
    for (const from of ["/usr/local/bin", "/usr/bin"]) {
      for (const name of await readdir(from).catch(() => [] as string[])) {
        if (name !== "df") await symlink(join(from, name), join(bin, name)).catch(() => undefined);
      }
    }
    const node = localNode();
    const staged = localNode();
    await stageNode(staged, hubSource, manifest, { files: ["config.json"] });
    const path = process.env.PATH;
    process.env.PATH = bin;
    hub.resetStats();
    try {
      const error = await stageNode(node, hubSource, manifest).catch((e: unknown) => e);
      expect(error).toMatchObject({ reason: "DiskSpaceUnknown" });
      expect((error as Error).message).toMatch(/^node local: cannot tell the free space at .* before transferring \d+ bytes: .*df/);
      expect(hub.stats().bytesServed).toBe(0);
      // Already present: no transfer, so no need to know the free space.
      const again = await stageNode(staged, hubSource, manifest, { files: ["config.json"] });
      expect(again).toMatchObject({ before: "present", bytesTransferred: 0 });
    } finally {
      process.env.PATH = path;
    }
  });
});
