/**
 * A failed node keeps its reason and whether retrying can help: a disk too small for the model is
 * not terminal (space freed there is found by the next try, and the refusal comes before any byte
 * moves), nor is a cut connection; a bad hash is terminal only when the Hub served the whole file
 * that way. A copy on the node that does not match its checksum is removed before the disk is
 * looked at, so that on a tight disk it does not take the room of its own replacement.
 */
import { execFileSync } from "node:child_process";
import { createHash } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { LocalNode, type NodeAccess } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/index.js";
import { fetchHubManifest, incompletePath, stageCluster, type Manifest, type StagingSource } from "../../src/staging/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";

const repo = "test-org/terminality-llama";
const commit = "1111111111222222222233333333334444444444";
const shard1 = "model-00001-of-00002.safetensors";

let hub: HubServer;
let root: string;
let hubSource: StagingSource;
let manifest: Manifest;
let counter = 0;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-staging-terminality-"));
  const modelDir = join(root, "model");
  // About 3 MB of weights: far more than the tiny disk below holds.
  await makeTestModel(modelDir, { layers: 4, hidden: 256, intermediate: 1024, vocab: 1024, shards: 2, seed: 7 });
  hub = await startHubServer({ repos: [{ repo, commit, dir: modelDir }] });
  hubSource = { kind: "hub", endpoint: hub.endpoint, repo, revision: "main" };
  manifest = await fetchHubManifest({ endpoint: hub.endpoint, repo, revision: "main" });
});

afterAll(async () => {
  await hub?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

function localNode(name: string, modelDir = join(root, `node-${++counter}`)): NodeAccess {
  return new LocalNode({ name, host: "local", modelDir });
}

describe("stageCluster keeps each failed node's reason and terminality", () => {
  it("a node whose disk is too small fails with InsufficientDisk, retried (not terminal); the other node is staged", async () => {
    const small = join(root, `tiny-fs-${++counter}`);
    await mkdir(small);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", small]);
    try {
      hub.resetStats();
      const result = await stageCluster(
        [
          { node: localNode("tiny", small), files: "all" },
          { node: localNode("roomy"), files: "all" },
        ],
        hubSource,
        { manifest },
      );
      expect(result.staged.map((s) => s.node)).toEqual(["roomy"]);
      expect(result.failed).toEqual([
        {
          node: "tiny",
          reason: "InsufficientDisk",
          terminal: false,
          message: expect.stringMatching(
            /^node tiny needs \d+ bytes more at .* but only \d+ bytes are free: free \d+ bytes there, or give the node a model_dir on a larger disk; tried again with back-off, at most a minute apart \(what was staged is kept\)$/,
          ),
        },
      ]);
      // Refused before a byte moved: everything the Hub served went to the roomy node.
      expect(hub.stats().bytesServed).toBe(manifest.files.reduce((sum, f) => sum + f.size, 0));
    } finally {
      execFileSync("umount", [small]);
    }
  });

  it("a copy that does not match its checksum, on a disk with room for one copy, is replaced: it is removed before the disk is looked at", async () => {
    const tight = join(root, `tight-fs-${++counter}`);
    await mkdir(tight);
    const modelBytes = manifest.files.reduce((sum, f) => sum + f.size, 0);
    // Room for the model once and a quarter: not for a second copy of its largest file beside the first.
    execFileSync("mount", ["-t", "tmpfs", "-o", `size=${Math.ceil((1.25 * modelBytes) / 4096) * 4}k`, "tmpfs", tight]);
    try {
      const node = localNode("tight", tight);
      expect((await stageCluster([{ node, files: "all" }], hubSource, { manifest })).failed).toEqual([]);
      // One byte of the largest blob flipped, its size kept (a disk fault, a stray write).
      const largest = [...manifest.files].sort((a, b) => b.size - a.size)[0]!;
      const blob = join(tight, "models--test-org--terminality-llama", "blobs", largest.hash);
      const bytes = await readFile(blob);
      bytes[1000] = bytes[1000]! ^ 0xff;
      await writeFile(blob, bytes);
      const again = await stageCluster([{ node, files: "all" }], hubSource, { manifest, verify: "full" });
      expect(again.failed).toEqual([]);
      expect(again.staged[0]).toMatchObject({ before: "mismatched", filesTransferred: 1 });
      expect(
        createHash("sha256")
          .update(await readFile(blob))
          .digest("hex"),
      ).toBe(largest.hash);
    } finally {
      execFileSync("umount", [tight]);
    }
  });

  it("a Hub that answers 429 (rate limited) is asked again only after a pause of seconds, not at once; the file then arrives", async () => {
    hub.injectFault({ path: shard1, status: 429, minBytes: 1000 });
    hub.resetStats();
    const started = performance.now();
    const result = await stageCluster([{ node: localNode("limited"), files: "all" }], hubSource, { manifest });
    expect(result.failed).toEqual([]);
    // Asked twice: refused, then served. The second attempt waited 10 s (a cut connection's waits 200 ms).
    expect(Object.entries(hub.stats().requestsByPath).find(([path]) => path.endsWith(shard1))?.[1]).toBe(2);
    expect(performance.now() - started).toBeGreaterThan(10_000);
  }, 60_000);

  it("a disk short of what is missing outright is refused before a full verification hashes anything (no turn taken): a node that stays full is not read end to end at every try", async () => {
    const small = join(root, `tiny-fs-${++counter}`);
    await mkdir(small);
    execFileSync("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", small]);
    try {
      let turns = 0;
      const result = await stageCluster([{ node: localNode("full-verify", small), files: "all" }], hubSource, {
        manifest,
        verify: "full",
        takeTurn: async () => {
          turns++;
          return () => undefined;
        },
      });
      expect(result.failed.map((f) => f.reason)).toEqual(["InsufficientDisk"]);
      expect(turns).toBe(0);
    } finally {
      execFileSync("umount", [small]);
    }
  });

  it("a staging called off while it waits to ask a rate-limiting Hub again ends at once, not after the wait", async () => {
    hub.injectFault({ path: shard1, status: 429, minBytes: 1000, times: 100 });
    const stop = new AbortController();
    try {
      const started = performance.now();
      setTimeout(() => stop.abort(new Error("called off")), 1_000);
      const result = await stageCluster([{ node: localNode("impatient"), files: "all" }], hubSource, { manifest, signal: stop.signal });
      expect(result.failed.map((f) => f.reason)).toEqual(["StagingCancelled"]);
      // The wait before the second attempt is 10 s.
      expect(performance.now() - started).toBeLessThan(5_000);
    } finally {
      hub.clearFaults();
    }
  });

  it("a file the Hub no longer has at the planned commit (404) fails saying so, and what would end it, retried (not terminal)", async () => {
    hub.injectFault({ path: shard1, status: 404, minBytes: 1000, times: 100 });
    try {
      const result = await stageCluster([{ node: localNode("gone"), files: "all" }], hubSource, { manifest });
      expect(result.failed).toEqual([
        {
          node: "gone",
          reason: "DownloadFailed",
          terminal: false,
          message: expect.stringMatching(
            new RegExp(
              `HTTP 404; the Hub no longer has ${shard1} at commit ${commit.slice(0, 12)}, which it listed when the revision was planned .*\`shardctl reconcile\` the cluster`,
            ),
          ),
        },
      ]);
    } finally {
      hub.clearFaults();
    }
  });

  it("a connection cut on every attempt fails with DownloadFailed, not terminal", async () => {
    hub.injectFault({ path: shard1, cutAfterBytes: 1000, times: 100 });
    try {
      const result = await stageCluster([{ node: localNode("flaky"), files: [shard1] }], hubSource, { manifest });
      expect(result.failed).toEqual([{ node: "flaky", reason: "DownloadFailed", terminal: false, message: expect.stringContaining(shard1) }]);
    } finally {
      hub.clearFaults();
    }
  });

  it("a whole file the Hub serves with other bytes than it lists is terminal; one spliced onto a bad partial is not", async () => {
    hub.injectFault({ path: shard1, corruptAtOffset: 1234, times: 1 });
    try {
      const whole = await stageCluster([{ node: localNode("served-bad"), files: [shard1] }], hubSource, { manifest });
      expect(whole.failed).toMatchObject([{ node: "served-bad", reason: "ChecksumMismatch", terminal: true }]);
    } finally {
      hub.clearFaults();
    }

    // A partial left by an earlier attempt that is not a prefix of the file: the resumed file is
    // wrong, but it was removed, so the next attempt starts clean and succeeds.
    const node = localNode("bad-partial");
    const sha = manifest.files.find((f) => f.path === shard1)!.hash;
    const partial = incompletePath(node.config.modelDir, repo, sha);
    await mkdir(join(partial, ".."), { recursive: true });
    await writeFile(partial, Buffer.alloc(1000, 0xff));
    const spliced = await stageCluster([{ node, files: [shard1] }], hubSource, { manifest });
    expect(spliced.failed).toMatchObject([{ node: "bad-partial", reason: "ChecksumMismatch", terminal: false }]);
    const again = await stageCluster([{ node, files: [shard1] }], hubSource, { manifest });
    expect(again.failed).toEqual([]);
    expect(again.staged.map((s) => s.filesTransferred)).toEqual([1]);
  });
});
