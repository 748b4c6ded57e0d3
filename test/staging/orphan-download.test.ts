/**
 * A download run on an SSH node (curl piped through head into the partial file) outlives the
 * question that started it: sshd gives a session without a pty no signal when its client goes, and
 * curl writes nothing to the channel that would tell it. Two ways that happens, on a real sshd with
 * the Hub stand-in pacing its bodies so the download is still running:
 *
 * - the daemon's connection drops (a partition, a laptop going to sleep): the next download of the
 *   file on that node stops the earlier one before it appends, and resumes from the file's own size;
 *   without that the two append side by side and the file is spliced (or passes its listed size);
 * - the question's deadline passes: the whole command is killed, curl and head too, not only the
 *   shell that started them.
 */
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/index.js";
import { blobPath, fetchHubManifest, incompletePath, snapshotDir, stageNode, type Manifest, type StagingSource } from "../../src/staging/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";

const repo = "test-org/orphan";
const commit = "fedcba9876543210fedcba9876543210fedcba98";
const shard = "model.safetensors";

let sshd: SshdSet;
let hub: HubServer;
let root: string;
let modelDir: string;
let source: StagingSource;
let manifest: Manifest;
let sha: string;
const pools: NodePool[] = [];

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-orphan-download-"));
  modelDir = join(root, "model");
  // One shard of about 3 MB: 15 s at the paced 200 kB/s.
  await makeTestModel(modelDir, { layers: 4, hidden: 256, intermediate: 1024, vocab: 1024, seed: 5 });
  [sshd, hub] = await Promise.all([startSshdNodes({ count: 1 }), startHubServer({ repos: [{ repo, commit, dir: modelDir }] })]);
  source = { kind: "hub", endpoint: hub.endpoint, repo, revision: "main" };
  manifest = await fetchHubManifest({ endpoint: hub.endpoint, repo, revision: "main" });
  sha = await hub.sha256Of(repo, shard);
}, 60_000);

afterAll(async () => {
  await Promise.all(pools.map((p) => p.close()));
  await hub?.close();
  await sshd?.close();
  if (root) await rm(root, { recursive: true, force: true });
});

/** The sshd node through a pool of its own (closing it drops that connection only), staging into `dir`. */
function sshNode(dir: string): { node: NodeAccess; pool: NodePool } {
  const pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: join(root, "no-ssh-config") });
  pools.push(pool);
  const node = pool.get(sshNodeConfig(sshd, 0, { modelDir: dir }));
  return { node, pool };
}

async function sizeOf(path: string): Promise<number> {
  return (await stat(path).catch(() => undefined))?.size ?? -1;
}

async function waitForSize(path: string, atLeast: number, deadlineMs: number): Promise<number> {
  const deadline = Date.now() + deadlineMs;
  for (;;) {
    const size = await sizeOf(path);
    if (size >= atLeast) return size;
    if (Date.now() > deadline) throw new Error(`${path} reached ${size} bytes, not ${atLeast}, within ${deadlineMs} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const servedPath = `/${repo}/resolve/${commit}/${shard}`;
const bytesServed = (): number => hub.stats().bytesByPath[servedPath] ?? 0;

/**
 * Wait (up to 10 s) until neither the partial file nor the hub's count of bytes served moved for a
 * second; a download that still runs (200 kB/s here) never settles.
 */
async function settled(partial: string, what: string): Promise<{ size: number; served: number }> {
  let size = await sizeOf(partial);
  let served = bytesServed();
  const settleBy = Date.now() + 10_000;
  for (;;) {
    await new Promise((r) => setTimeout(r, 1_000));
    const [nowSize, nowServed] = [await sizeOf(partial), bytesServed()];
    if (nowSize === size && nowServed === served) return { size, served };
    [size, served] = [nowSize, nowServed];
    if (Date.now() > settleBy) throw new Error(`${what} still runs: ${size} bytes in the partial file, ${served} served`);
  }
}

it("a download whose connection dropped is stopped by the next one, which resumes from the file's own size: the file arrives whole", async () => {
  const dir = join(sshd.nodes[0]!.modelDir, "dropped");
  const partial = incompletePath(dir, repo, sha);
  hub.pace(200_000);
  const first = sshNode(dir);
  const dropped = stageNode(first.node, source, manifest, { attempts: 1 }).then(
    () => "finished",
    (error: Error) => error.message,
  );
  await waitForSize(partial, 100_000, 20_000);
  await first.pool.close();
  expect(await dropped).toMatch(/closed|unreachable|connection/i);
  // The earlier download still runs on the node: the file keeps growing with no one asking.
  const orphaned = await sizeOf(partial);
  await waitForSize(partial, orphaned + 50_000, 5_000);

  // The next pass, fast: without the stop, the two downloads append side by side.
  hub.pace(undefined);
  const second = sshNode(dir);
  await stageNode(second.node, source, manifest);
  const staged = join(snapshotDir(dir, repo, commit), shard);
  expect((await readFile(staged)).equals(await readFile(join(modelDir, shard)))).toBe(true);
  // Nothing of the earlier download is left: the hub sends it no more bytes, and no partial file or writer record stays.
  const served = bytesServed();
  await new Promise((r) => setTimeout(r, 1_000));
  expect(bytesServed()).toBe(served);
  expect(await sizeOf(partial)).toBe(-1);
  expect(await sizeOf(`${partial}.writer`)).toBe(-1);
}, 60_000);

it("a download past its deadline is killed whole: curl stops fetching and the partial file stops growing", async () => {
  const dir = join(sshd.nodes[0]!.modelDir, "deadline");
  const partial = incompletePath(dir, repo, sha);
  hub.pace(200_000);
  const { node } = sshNode(dir);
  const error = await stageNode(node, source, manifest, { attempts: 1, transferDeadlineMs: 1_500 }).then(
    () => undefined,
    (e: Error) => e,
  );
  expect(error?.message).toMatch(/timed out after \d+ ms/);
  // The kill goes out as the deadline passes, over a fresh SSH exec: wait (up to 10 s) until nothing
  // moved for a second, then nothing may move for 1.5 s more. Without the kill the body keeps coming
  // at 200 kB/s and the first wait runs out.
  const { size, served } = await settled(partial, "the download past its deadline");
  expect(size).toBeGreaterThan(0);
  await new Promise((r) => setTimeout(r, 1_500));
  expect(await sizeOf(partial)).toBe(size);
  expect(bytesServed()).toBe(served);
  hub.pace(undefined);
}, 60_000);

it("a staging stopped by its signal kills the node's download at once and keeps the partial file", async () => {
  const dir = join(sshd.nodes[0]!.modelDir, "stopped");
  const partial = incompletePath(dir, repo, sha);
  hub.pace(200_000);
  const { node } = sshNode(dir);
  const controller = new AbortController();
  const staging = stageNode(node, source, manifest, { signal: controller.signal }).then(
    () => undefined,
    (e: Error & { reason?: string }) => e,
  );
  await waitForSize(partial, 100_000, 20_000);
  const stoppedAt = Date.now();
  controller.abort(new Error("its definition now asks for revision abc"));
  const error = await staging;
  // Answered without waiting for the download (about 15 s at this pace) or a retry.
  expect(Date.now() - stoppedAt).toBeLessThan(5_000);
  expect(error?.reason).toBe("StagingCancelled");
  expect(error?.message).toMatch(/staging stopped during model\.safetensors \(its partial file is kept\): its definition now asks for revision abc/);
  // curl and head were killed with their shell: the file and the hub's count settle, and stay.
  const { size } = await settled(partial, "the stopped download");
  expect(size).toBeGreaterThanOrEqual(100_000);
  await new Promise((r) => setTimeout(r, 1_500));
  expect(await sizeOf(partial)).toBe(size);
  hub.pace(undefined);
}, 60_000);

it("a staging stopped while it hashes a file the node holds answers at once, and the hashing ends on the node", async () => {
  const dir = join(sshd.nodes[0]!.modelDir, "hashing");
  // A 16 GiB blob of holes that no stat cache vouches for: classifying it hashes it, for seconds.
  const held: Manifest = {
    repo: "test-org/held",
    revision: "main",
    commit: "0123456789abcdef0123456789abcdef01234567",
    files: [{ path: "model.safetensors", size: 16 * 1024 ** 3, hash: "ab".repeat(32), hashAlgo: "sha256" }],
  };
  const blob = blobPath(dir, held.repo, held.files[0]!.hash);
  const { node } = sshNode(dir);
  await node.mkdir(blob.slice(0, blob.lastIndexOf("/")));
  expect((await node.run(["truncate", "-s", "16G", blob])).exitCode).toBe(0);
  const controller = new AbortController();
  const staging = stageNode(node, source, held, { signal: controller.signal }).then(
    () => undefined,
    (e: Error & { reason?: string }) => e,
  );
  await new Promise((r) => setTimeout(r, 500));
  const stoppedAt = Date.now();
  controller.abort(new Error("its definition now asks for revision abc"));
  const error = await staging;
  expect(Date.now() - stoppedAt).toBeLessThan(2_000);
  expect(error?.reason).toBe("StagingCancelled");
  expect(error?.message).toMatch(/staging stopped: its definition now asks for revision abc$/);
  const hashers = async (): Promise<string> => (await node.run(["sh", "-c", 'ps -eo args | grep -F -- "$1" | grep -v grep || true', "sh", blob])).stdout;
  for (let i = 0; i < 20 && (await hashers()) !== ""; i++) await new Promise((r) => setTimeout(r, 100));
  expect(await hashers()).toBe("");
  await node.remove(dir);
}, 60_000);
