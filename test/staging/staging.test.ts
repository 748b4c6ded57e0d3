import { execFileSync } from "node:child_process";
import { mkdir, mkdtemp, readFile, readlink, rm, stat, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalNode, NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { filesForStage, inspectModel, makeTestModel } from "../../src/planner/index.js";
import {
  assertSafePath,
  blobPath,
  classifyNode,
  fetchHubManifest,
  hashLocalManifest,
  incompletePath,
  snapshotDir,
  stageCluster,
  stageNode,
  type Manifest,
  type StagingProgress,
  type StagingSource,
} from "../../src/staging/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";
import { allocateHost } from "../support/test-world.js";

const repo = "test-org/tiny-llama";
const commit = "0123456789abcdef0123456789abcdef01234567";
const shard1 = "model-00001-of-00002.safetensors";
const shard2 = "model-00002-of-00002.safetensors";

let sshd: SshdSet;
let hub: HubServer;
let pool: NodePool;
let root: string;
let modelDir: string;
let hubSource: StagingSource;
let manifest: Manifest;
let counter = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-staging-"));
  modelDir = join(root, "model");
  // Big enough that a cut connection leaves a real partial file (≈ 2 × 1.5 MB shards).
  await makeTestModel(modelDir, { layers: 4, hidden: 256, intermediate: 1024, vocab: 1024, shards: 2, seed: 3 });
  [sshd, hub] = await Promise.all([startSshdNodes({ count: 2 }), startHubServer({ repos: [{ repo, commit, dir: modelDir }] })]);
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(root, "no-ssh-config") });
  hubSource = { kind: "hub", endpoint: hub.endpoint, repo, revision: "main" };
  manifest = await fetchHubManifest({ endpoint: hub.endpoint, repo, revision: "main" });
});

afterAll(async () => {
  await pool?.close();
  await hub?.close();
  await sshd?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

/** A fresh model dir on sshd node i (each test stages into its own). */
function sshNode(i: number): NodeAccess {
  return pool.get(sshNodeConfig(sshd, i, { modelDir: join(sshd.nodes[i]!.modelDir, `t${++counter}`) }));
}

async function localNode(): Promise<NodeAccess> {
  return new LocalNode({ name: "local", host: "local", modelDir: join(root, `local-${++counter}`) });
}

/** Byte equality without vitest's element-wise Buffer diff (seconds for a few MB). */
async function expectSameBytes(a: string, b: string): Promise<void> {
  const [x, y] = await Promise.all([readFile(a), readFile(b)]);
  expect(x.length).toBe(y.length);
  expect(x.equals(y)).toBe(true);
}

describe("manifests", () => {
  it("pins a branch to its commit and takes sha256 from the tree's LFS entries", async () => {
    expect(manifest.commit).toBe(commit);
    const shard = manifest.files.find((f) => f.path === shard1);
    expect(shard).toMatchObject({ hashAlgo: "sha256", hash: await hub.sha256Of(repo, shard1) });
    expect(manifest.files.find((f) => f.path === "config.json")?.hashAlgo).toBe("git-sha1");
  });

  it("hashes a push source and derives a content commit", async () => {
    const local = await hashLocalManifest(modelDir, repo);
    expect(local.files.find((f) => f.path === shard1)?.hash).toBe(await hub.sha256Of(repo, shard1));
    expect(local.commit).toMatch(/^[0-9a-f]{40}$/);
    expect((await hashLocalManifest(modelDir, repo)).commit).toBe(local.commit);
  });

  it("refuses hostile file names from any source", async () => {
    for (const bad of ["../etc/passwd", "a/../../b", "/etc/passwd", "a\0b", "", "a//b", "C:\\x"]) {
      expect(() => assertSafePath(bad, "test")).toThrow(expect.objectContaining({ reason: "UnsafeFileName" }));
    }
    // A Hub that lists a traversal in its tree is refused before anything is written.
    const evil: Server = createServer((req, res) => {
      res.setHeader("X-Repo-Commit", commit);
      res.end(JSON.stringify([{ type: "file", path: "../../outside", size: 1, oid: "a".repeat(40) }]));
    });
    const evilHost = await allocateHost();
    await new Promise<void>((r) => evil.listen(0, evilHost, () => r()));
    const endpoint = `http://${evilHost}:${(evil.address() as AddressInfo).port}`;
    try {
      await expect(fetchHubManifest({ endpoint, repo, revision: "main" })).rejects.toMatchObject({ reason: "UnsafeFileName" });
    } finally {
      await new Promise<void>((r) => evil.close(() => r()));
    }
    await expect(stageNode(await localNode(), hubSource, manifest, { files: ["../config.json"] })).rejects.toMatchObject({ reason: "UnsafeFileName" });
  });

  it("refuses a revision the Hub resolves to something other than a commit id, before anything is listed or fetched", async () => {
    for (const answer of ["a".repeat(300), "../../x", "ABCDEF0123456789ABCDEF0123456789ABCDEF01"]) {
      const requests: string[] = [];
      const odd: Server = createServer((req, res) => {
        requests.push(`${req.method} ${req.url}`);
        res.setHeader("X-Repo-Commit", answer);
        res.end("{}");
      });
      const oddHost = await allocateHost();
      await new Promise<void>((r) => odd.listen(0, oddHost, () => r()));
      const endpoint = `http://${oddHost}:${(odd.address() as AddressInfo).port}`;
      try {
        const refused = await fetchHubManifest({ endpoint, repo, revision: "main" }).catch((error: unknown) => error);
        expect(refused).toMatchObject({ reason: "HubError", terminal: true });
        expect((refused as Error).message).toContain("is not a commit id (40 or 64 lowercase hex digits)");
        expect(requests.every((r) => r.startsWith("HEAD "))).toBe(true);
      } finally {
        await new Promise<void>((r) => odd.close(() => r()));
      }
    }
  });
});

describe("staging over ssh from the hub", () => {
  it("classifies needs-download, present and mismatched, and repairs a corrupted blob", async () => {
    const node = sshNode(0);
    const layout = { kind: "cache" as const, modelDir: node.config.modelDir };
    expect((await classifyNode(node, manifest, layout)).state).toBe("needs-download");

    const events: StagingProgress[] = [];
    const first = await stageNode(node, hubSource, manifest, { onProgress: (e) => events.push(e) });
    const total = manifest.files.reduce((s, f) => s + f.size, 0);
    expect(first).toMatchObject({ before: "needs-download", bytesTransferred: total, filesTransferred: manifest.files.length });
    expect(events.at(-1)).toMatchObject({ phase: "done", bytesDone: total, bytesTotal: total });
    expect((await classifyNode(node, manifest, layout)).state).toBe("present");

    // HF cache layout: relative links into blobs, refs/main holds the commit.
    const snap = snapshotDir(node.config.modelDir, repo, commit);
    expect(await readlink(join(snap, shard1))).toBe(`../../blobs/${await hub.sha256Of(repo, shard1)}`);
    await expectSameBytes(join(snap, shard1), join(modelDir, shard1));
    expect(await readFile(join(node.config.modelDir, `models--test-org--tiny-llama/refs/main`), "utf8")).toBe(commit);

    // Same size, one byte flipped.
    const blob = blobPath(node.config.modelDir, repo, await hub.sha256Of(repo, shard2));
    execFileSync("sh", ["-c", 'printf Z | dd of="$1" bs=1 seek=4096 conv=notrunc status=none', "sh", blob]);
    const corrupt = await classifyNode(node, manifest, layout);
    expect(corrupt.state).toBe("mismatched");
    expect(corrupt.files.filter((f) => f.state === "mismatched").map((f) => f.file.path)).toEqual([shard2]);

    hub.resetStats();
    const repaired = await stageNode(node, hubSource, manifest);
    expect(repaired).toMatchObject({ before: "mismatched", filesTransferred: 1 });
    expect(hub.stats().bytesServed).toBe((await stat(join(modelDir, shard2))).size);
    await expectSameBytes(blob, join(modelDir, shard2));
    expect((await classifyNode(node, manifest, layout, { verify: "full" })).state).toBe("present");
  });

  it("re-staging a present model transfers 0 bytes and hashes nothing", async () => {
    const node = sshNode(1);
    await stageNode(node, hubSource, manifest);
    hub.resetStats();
    const again = await stageNode(node, hubSource, manifest);
    expect(again).toMatchObject({ before: "present", bytesTransferred: 0, filesTransferred: 0, hashedFiles: 0 });
    expect(hub.stats().requests).toBe(0);
    // verify = "full" re-hashes everything but still transfers nothing.
    const full = await stageNode(node, hubSource, manifest, { verify: "full" });
    expect(full).toMatchObject({ before: "present", bytesTransferred: 0, hashedFiles: manifest.files.length });
    expect(hub.stats().bytesServed).toBe(0);
  });

  it.each(["ssh", "local"])("resumes a download cut mid-file without re-fetching completed bytes (%s node)", async (kind) => {
    const node = kind === "ssh" ? sshNode(0) : await localNode();
    const size = (await stat(join(modelDir, shard1))).size;
    const cut = Math.floor(size / 3);
    hub.resetStats();
    hub.injectFault({ path: shard1, cutAfterBytes: cut });
    const result = await stageNode(node, hubSource, manifest, { files: [shard1] });
    const path = `/${repo}/resolve/${commit}/${shard1}`;
    expect(hub.stats().requestsByPath[path]).toBe(2);
    expect(hub.stats().bytesByPath[path]).toBe(size);
    expect(result.bytesTransferred).toBe(size);
    await expectSameBytes(join(snapshotDir(node.config.modelDir, repo, commit), shard1), join(modelDir, shard1));
  });

  it("resumes a partial .incomplete left by an earlier run", async () => {
    const node = sshNode(1);
    const sha = await hub.sha256Of(repo, shard2);
    const partial = incompletePath(node.config.modelDir, repo, sha);
    const content = await readFile(join(modelDir, shard2));
    await mkdir(join(partial, ".."), { recursive: true });
    await writeFile(partial, content.subarray(0, 100_000));
    expect((await classifyNode(node, manifest, { kind: "cache", modelDir: node.config.modelDir })).files.find((f) => f.file.path === shard2)).toMatchObject({
      state: "partial",
      haveBytes: 100_000,
    });
    hub.resetStats();
    await stageNode(node, hubSource, manifest, { files: [shard2] });
    expect(hub.stats().bytesServed).toBe(content.length - 100_000);
  });

  it("a corrupted download is refused and its partial file removed", async () => {
    const node = sshNode(0);
    hub.injectFault({ path: shard1, corruptAtOffset: 1234, times: 5 });
    await expect(stageNode(node, hubSource, manifest, { files: [shard1] })).rejects.toMatchObject({ reason: "ChecksumMismatch" });
    hub.clearFaults();
    const sha = await hub.sha256Of(repo, shard1);
    expect(await node.stat(incompletePath(node.config.modelDir, repo, sha))).toBeUndefined();
    expect(await node.stat(blobPath(node.config.modelDir, repo, sha))).toBeUndefined();
  });

  it("a stage downloads only its own shard files", async () => {
    const profile = await inspectModel({ kind: "dir", path: modelDir });
    const first = filesForStage(profile, { layers: [0, 2], first: true, last: false });
    expect(first).toEqual([shard1]);
    const wanted = [...first, "config.json", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"];
    const node = sshNode(0);
    hub.resetStats();
    const result = await stageNode(node, hubSource, manifest, { files: wanted });
    const served = Object.keys(hub.stats().requestsByPath).map((p) => p.split("/").at(-1));
    expect(served.sort()).toEqual(wanted.sort());
    expect(hub.stats().bytesServed).toBe(manifest.files.filter((f) => wanted.includes(f.path)).reduce((s, f) => s + f.size, 0));
    expect(await node.stat(join(result.modelPath, shard2))).toBeUndefined();
    expect((await node.stat(join(result.modelPath, shard1)))?.size).toBe((await stat(join(modelDir, shard1))).size);
  });
});

describe("downloads on the control node", () => {
  it("follows a redirect to another origin (the Hub's CDN) and drops the token there", async () => {
    const seen: Array<{ url: string; auth: string | undefined }> = [];
    const redirector: Server = createServer((req, res) => {
      seen.push({ url: req.url ?? "", auth: req.headers.authorization });
      res.writeHead(302, { Location: `${hub.endpoint}${req.url ?? "/"}`, "X-Repo-Commit": commit });
      res.end();
    });
    const redirectorHost = await allocateHost();
    await new Promise<void>((r) => redirector.listen(0, redirectorHost, () => r()));
    try {
      const endpoint = `http://${redirectorHost}:${(redirector.address() as AddressInfo).port}`;
      const node = await localNode();
      hub.resetStats();
      const result = await stageNode(node, { kind: "hub", endpoint, repo, revision: "main", token: "secret-token" }, manifest, { files: [shard1] });
      expect(result.filesTransferred).toBe(1);
      await expectSameBytes(join(result.modelPath, shard1), join(modelDir, shard1));
      expect(seen.some((s) => s.url.endsWith(shard1) && s.auth === "Bearer secret-token")).toBe(true);
      // The hub (another origin) served the bytes without ever seeing the token.
      expect(hub.stats().bytesServed).toBe((await stat(join(modelDir, shard1))).size);
      expect(hub.stats().requestsWithAuthorization).toBe(0);
    } finally {
      await new Promise<void>((r) => redirector.close(() => r()));
    }
  });
});

describe("hub tokens", () => {
  it("sends the token from both download paths (curl on the node reads it from stdin)", async () => {
    const guarded = await startHubServer({ repos: [{ repo, commit, dir: modelDir }], token: "hf_s3cret 'quoted'" });
    try {
      // Without a token, and with a wrong one: each says which, and what to do.
      await expect(fetchHubManifest({ endpoint: guarded.endpoint, repo, revision: "main" })).rejects.toMatchObject({
        reason: "HubUnauthorized",
        message: expect.stringMatching(/: 401; no token was sent: set the variable \[hub\] token_env names \(HF_TOKEN by default\) in the daemon's environment/),
      });
      await expect(fetchHubManifest({ endpoint: guarded.endpoint, repo, revision: "main", token: "hf_wrong" })).rejects.toMatchObject({
        reason: "HubUnauthorized",
        message: expect.stringMatching(/: 401; the token sent was refused: check that it may read /),
      });
      const source: StagingSource = { kind: "hub", endpoint: guarded.endpoint, repo, revision: "main", token: "hf_s3cret 'quoted'" };
      const pinned = await fetchHubManifest(source);
      for (const node of [sshNode(1), await localNode()]) {
        const result = await stageNode(node, source, pinned, { files: ["config.json", shard2] });
        expect(result.filesTransferred).toBe(2);
      }
    } finally {
      await guarded.close();
    }
  });
});

describe("refusals and other sources", () => {
  it("refuses before transferring when the disk is too small", async () => {
    const small = join(root, `tiny-fs-${++counter}`);
    await mkdir(small);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", small]);
    try {
      const node = new LocalNode({ name: "tiny", host: "local", modelDir: small });
      hub.resetStats();
      const error = await stageNode(node, hubSource, manifest).catch((e: unknown) => e);
      expect(error).toMatchObject({ reason: "InsufficientDisk" });
      expect((error as Error).message).toMatch(
        /^node tiny needs \d+ bytes more at .* but only \d+ bytes are free: free \d+ bytes there, or give the node a model_dir on a larger disk; tried again with back-off, at most a minute apart \(what was staged is kept\)$/,
      );
      expect(hub.stats().bytesServed).toBe(0);
    } finally {
      execFileSync("umount", [small]);
    }
  });

  it("pushes over SFTP to two sshd nodes", async () => {
    const source: StagingSource = { kind: "push", dir: modelDir, repo };
    const nodes = [sshNode(0), sshNode(1)];
    const result = await stageCluster(
      nodes.map((node) => ({ node, files: "all" as const })),
      source,
    );
    expect(result.failed).toEqual([]);
    expect(result.staged.map((s) => s.before)).toEqual(["needs-download", "needs-download"]);
    for (const node of nodes) {
      const snap = snapshotDir(node.config.modelDir, repo, result.manifest.commit);
      await expectSameBytes(join(snap, shard2), join(modelDir, shard2));
    }
    const again = await stageCluster(
      nodes.map((node) => ({ node, files: "all" as const })),
      source,
      { manifest: result.manifest },
    );
    expect(again.staged.map((s) => s.bytesTransferred)).toEqual([0, 0]);
  });

  it('source "path" verifies in place and never writes', async () => {
    const node = sshNode(0);
    const local = await hashLocalManifest(modelDir, repo);
    const ok = await stageNode(node, { kind: "path", path: modelDir }, local);
    expect(ok).toMatchObject({ before: "present", bytesTransferred: 0, modelPath: modelDir });
    const copy = join(root, `path-copy-${++counter}`);
    execFileSync("cp", ["-r", modelDir, copy]);
    execFileSync("truncate", ["-s", "10", join(copy, shard1)]);
    await expect(stageNode(node, { kind: "path", path: copy }, local)).rejects.toMatchObject({ reason: "ModelNotPresent" });
    expect((await stat(join(copy, shard1))).size).toBe(10);
    expect(await node.stat(node.config.modelDir)).toBeUndefined();
  });
});
