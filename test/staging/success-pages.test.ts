/**
 * A Hub endpoint (or a proxy in front of it) that answers with a success status but not with the
 * file — a rate limit's or a login page sent as 200 — or that stops sending while keeping the
 * connection open. Neither says anything about the file itself: the download is retried (never a
 * terminal checksum failure), the bytes already on the node are kept, and a silent server costs the
 * idle bound, not the hour of the whole-file deadline. Downloads run in-process (a local node) and
 * with curl on an SSH node.
 */
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { LocalNode, NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/index.js";
import { blobPath, fetchHubManifest, incompletePath, stageNode, type Manifest, type StagingSource } from "../../src/staging/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

const repo = "test-org/pages-llama";
const commit = "abababababcdcdcdcdcdefefefefef0101010101";
const shard = "model-00002-of-00002.safetensors";
const page = "<html><body>Too many requests</body></html>";

let sshd: SshdSet;
let hub: HubServer;
let pool: NodePool;
let root: string;
let modelDir: string;
let source: StagingSource;
let manifest: Manifest;
let sha: string;
let counter = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-staging-pages-"));
  modelDir = join(root, "model");
  await makeTestModel(modelDir, { layers: 4, hidden: 256, intermediate: 1024, vocab: 1024, shards: 2, seed: 11 });
  [sshd, hub] = await Promise.all([startSshdNodes({ count: 1 }), startHubServer({ repos: [{ repo, commit, dir: modelDir }] })]);
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(root, "no-ssh-config") });
  source = { kind: "hub", endpoint: hub.endpoint, repo, revision: "main" };
  manifest = await fetchHubManifest({ endpoint: hub.endpoint, repo, revision: "main" });
  sha = await hub.sha256Of(repo, shard);
});

afterAll(async () => {
  await pool?.close();
  await hub?.close();
  await sshd?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

function localNode(): NodeAccess {
  return new LocalNode({ name: "local", host: "local", modelDir: join(root, `local-${++counter}`) });
}

function sshNode(): NodeAccess {
  return pool.get(sshNodeConfig(sshd, 0, { modelDir: join(sshd.nodes[0]!.modelDir, `p${++counter}`) }));
}

async function expectStaged(node: NodeAccess): Promise<void> {
  const [got, want] = await Promise.all([readFile(blobPath(node.config.modelDir, repo, sha)), readFile(join(modelDir, shard))]);
  expect(got.equals(want)).toBe(true);
}

/** A partial file of the shard's first `bytes` bytes on `node` (both kinds of node see this machine's files). */
async function placePartial(node: NodeAccess, bytes: number): Promise<string> {
  const partial = incompletePath(node.config.modelDir, repo, sha);
  await mkdir(join(partial, ".."), { recursive: true });
  await writeFile(partial, (await readFile(join(modelDir, shard))).subarray(0, bytes));
  return partial;
}

describe("a page sent with a success status instead of the file", () => {
  for (const kind of ["local", "ssh"] as const) {
    it(`${kind} node: the page is not kept, and the next attempt stages the file`, async () => {
      const node = kind === "local" ? localNode() : sshNode();
      hub.clearFaults();
      hub.injectFault({ path: shard, page });
      const result = await stageNode(node, source, manifest, { files: [shard], attempts: 2 });
      expect(result.filesTransferred).toBe(1);
      await expectStaged(node);
    });
  }

  it("local node, resuming: the failure is retryable and the bytes already there are kept", async () => {
    const node = localNode();
    const partial = await placePartial(node, 100_000);
    hub.clearFaults();
    hub.injectFault({ path: shard, page });
    const error = await stageNode(node, source, manifest, { files: [shard], attempts: 1 }).catch((e: unknown) => e);
    expect(isShardctlError(error, "DownloadFailed")).toBe(true);
    expect(isShardctlError(error) && error.terminal).toBe(false);
    expect((error as Error).message).toContain(`HTTP 200 with a body of ${page.length} bytes`);
    expect((error as Error).message).toContain("not the listed file");
    expect((await stat(partial)).size).toBe(100_000);
    // The next pass resumes from those bytes.
    hub.resetStats();
    await stageNode(node, source, manifest, { files: [shard], attempts: 1 });
    await expectStaged(node);
    const size = manifest.files.find((f) => f.path === shard)!.size;
    expect(hub.stats().bytesServed).toBe(size - 100_000);
  });
});

describe("a server that stops sending and keeps the connection open", () => {
  for (const kind of ["local", "ssh"] as const) {
    it(`${kind} node: the download is cut after the idle bound and the next attempt resumes`, async () => {
      const node = kind === "local" ? localNode() : sshNode();
      hub.clearFaults();
      hub.injectFault({ path: shard, stallAfterBytes: 200_000 });
      hub.resetStats();
      // Without the idle bound this would wait out the whole-file deadline (an hour by default).
      const result = await stageNode(node, source, manifest, { files: [shard], attempts: 2, transferIdleMs: 1_500 });
      expect(result.filesTransferred).toBe(1);
      await expectStaged(node);
      const size = manifest.files.find((f) => f.path === shard)!.size;
      // The second request asked only for what the first did not bring.
      expect(hub.stats().requestsByPath[`/${repo}/resolve/${commit}/${shard}`]).toBe(2);
      expect(hub.stats().bytesServed).toBe(size);
    }, 60_000);
  }
});
