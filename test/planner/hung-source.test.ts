/**
 * A model directory on a network mount whose server freezes: every read of it hangs in the kernel,
 * and each hung read holds one of Node's four file-system threads. Four passes reading one frozen
 * mount stopped every file operation of the daemon (status files, lock, ledger) for as long as it
 * lasted. Reads of a model directory go one at a time, each within a deadline: the frozen mount
 * holds one thread, its reads fail saying the file system does not answer, the process's other file
 * operations go on, and once the mount answers again it is read as before. A node's look at files
 * there (staging's stat) ends when its pass is called off, not at its 30 s deadline; a node's probe
 * with its model dir there keeps the memory figures it found and names the look that hung.
 *
 * The mount is a real sshfs (FUSE) mount of a real sshd's folder; "frozen" is its sshfs process
 * stopped with SIGSTOP, as a hung server leaves it. Needs root, /dev/fuse, and the Debian package
 * sshfs (installed here when missing).
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { execFile } from "node:child_process";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/index.js";
import { createDirReader } from "../../src/planner/dir-source.js";
import { isShardctlError } from "../../src/errors/index.js";
import { LocalNode, probeNode } from "../../src/nodes/index.js";
import { closeInTurn, readChunkInTurn } from "../../src/files/index.js";
import { hashLocalManifest } from "../../src/staging/index.js";
import { startSshdNodes, type SshdSet } from "../support/sshd.js";
import { mountSshfs, type SshfsMount } from "../support/sshfs-mount.js";

const run = promisify(execFile);
let root: string;
let mount: SshfsMount | undefined;
const weightsBytes = 16 << 20;
let sshd: SshdSet;

beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-hung-source-"));
  sshd = await startSshdNodes({ count: 1 });
  const node = sshd.nodes[0]!;
  await makeTestModel(join(node.modelDir, "tiny"), { layers: 4, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 5 });
  // A file pushes read slowly enough to be frozen mid-way.
  await run("head", ["-c", String(weightsBytes), "/dev/urandom"], { encoding: "buffer", maxBuffer: weightsBytes + 1 }).then(({ stdout }) =>
    writeFile(join(node.modelDir, "tiny", "weights.bin"), stdout),
  );
  mount = await mountSshfs(sshd, node.modelDir, join(root, "mnt"), "tiny/config.json");
}, 15 * 60_000);

afterAll(async () => {
  await mount?.close();
  await sshd?.close();
  if (root !== undefined) await rm(root, { recursive: true, force: true });
});

test("a frozen mount: its reads fail within the deadline saying so, one thread at most waits on it, the process's other file operations go on; read again once it answers", async () => {
  const model = join(mount!.path, "tiny");
  expect(await createDirReader(model).readJson("config.json", 1 << 20)).toMatchObject({ num_hidden_layers: 4 });
  mount!.freeze();
  try {
    // Six passes at once, as six clusters of this model would plan it: each its own reader.
    const startedAt = performance.now();
    const reads = Array.from({ length: 6 }, (_, i) =>
      createDirReader(model, { readDeadlineMs: 1_500 })
        .readHeader(i % 2 === 0 ? "model.safetensors" : "config.json")
        .then(
          () => "answered",
          (error: unknown) => error,
        ),
    );
    // Meanwhile, a file elsewhere reads as ever: the file-system threads are not all taken.
    const elsewhere = join(root, "elsewhere.txt");
    await run("sh", ["-c", `echo fine > ${elsewhere}`]);
    await new Promise((r) => setTimeout(r, 300));
    const other = await Promise.race([readFile(elsewhere, "utf8"), new Promise((r) => setTimeout(() => r("no answer within 5 s"), 5_000))]);
    expect(other).toBe("fine\n");
    const outcomes = await Promise.all(reads);
    expect(performance.now() - startedAt).toBeLessThan(10_000);
    for (const outcome of outcomes) {
      expect(isShardctlError(outcome, "ModelSourceUnreachable"), String(outcome)).toBe(true);
      expect((outcome as Error).message).toMatch(
        new RegExp(`^the read of \\S+ .*in the model directory ${model} has not returned for \\d+ s: the file system holding it does not answer`),
      );
    }
    // A node's look at files on such a mount (staging's) ends when its pass is called off.
    const node = new LocalNode({ name: "local", host: "local", modelDir: root });
    const lookStarted = performance.now();
    const look = await node.statMany([join(model, "model.safetensors")], { signal: AbortSignal.timeout(500) }).catch((error: unknown) => error);
    expect(look).toBeInstanceOf(Error);
    expect(performance.now() - lookStarted).toBeLessThan(5_000);
    // A node probed with its model_dir there: the probe's look at the free space hangs, and what
    // the node said before (its memory, which plans are budgeted with) is kept, the hang named.
    const probe = await probeNode(new LocalNode({ name: "mounted", host: "local", modelDir: join(model, "staged") }), { deadlineMs: 1_500 });
    expect(probe.error).toBe(
      `the probe got no answer within 1500 ms: the look at the free space of ${join(model, "staged")} did not return (a file system there that does not answer: a frozen network mount, a failing disk?)`,
    );
    expect(probe).toMatchObject({ reachable: true, memoryTotalBytes: expect.any(Number), memoryAvailableBytes: expect.any(Number) });
    expect(probe.diskFreeBytes).toBeUndefined();
  } finally {
    mount!.thaw();
  }
  // The hung read returns once the mount answers; then the directory is read again.
  let config: unknown;
  for (let i = 0; i < 50 && config === undefined; i++) {
    config = await createDirReader(model)
      .readJson("config.json", 1 << 20)
      .catch(() => undefined);
    if (config === undefined) await new Promise((r) => setTimeout(r, 200));
  }
  expect(config).toMatchObject({ num_hidden_layers: 4 });
}, 120_000);

test("staging from a mount that freezes: the hash and four pushes at once fail within the deadline saying so, and hold one file-system thread, not one each", async () => {
  const model = join(mount!.path, "tiny");
  const file = join(model, "weights.bin");
  const local = new LocalNode({ name: "local", host: "local", modelDir: root });
  // Four nodes pushed to at once, each read paced (20 ms per 1 MiB) so that the freeze finds them mid-way.
  const progress = [0, 0, 0, 0];
  const readPaced = readChunkInTurn(model, "weights.bin", 1_500);
  const pushes = progress.map((_, i) =>
    local
      .putFile(file, join(root, `copy-${i}`), {
        onProgress: (bytes) => (progress[i] = bytes),
        readLocal: (fd, buffer, offset, length, position, done) => setTimeout(() => readPaced(fd, buffer, offset, length, position, done), 20),
        closeLocal: (close) => closeInTurn(model, "weights.bin", close),
      })
      .then(
        () => "finished",
        (error: unknown) => error,
      ),
  );
  for (let i = 0; i < 100 && progress.some((p) => p === 0); i++) await new Promise((r) => setTimeout(r, 20));
  expect(
    progress.every((p) => p > 0 && p < weightsBytes),
    String(progress),
  ).toBe(true);
  mount!.freeze();
  try {
    const startedAt = performance.now();
    const hashed = hashLocalManifest(model, "org/tiny", "main", { readDeadlineMs: 1_500 }).then(
      () => "hashed",
      (error: unknown) => error,
    );
    // Meanwhile, a file elsewhere reads as ever.
    const elsewhere = join(root, "elsewhere-2.txt");
    // Written in-process: a child process started now would hang at its exec, closing its copies of
    // the pushes' open descriptors on the frozen FUSE mount (FUSE flushes on every close).
    await writeFile(elsewhere, "fine\n");
    await new Promise((r) => setTimeout(r, 2_500));
    const other = await Promise.race([readFile(elsewhere, "utf8"), new Promise((r) => setTimeout(() => r("no answer within 5 s"), 5_000))]);
    expect(other).toBe("fine\n");
    for (const outcome of [...(await Promise.all(pushes)), await hashed]) {
      expect(isShardctlError(outcome, "ModelSourceUnreachable"), String(outcome)).toBe(true);
      expect((outcome as Error).message).toMatch(new RegExp(`^the read of .* in the model directory ${model} has not returned for \\d+ s`));
    }
    expect(performance.now() - startedAt).toBeLessThan(10_000);
  } finally {
    mount!.thaw();
  }
  // Once it answers, the same hash goes through.
  let manifest: Awaited<ReturnType<typeof hashLocalManifest>> | undefined;
  for (let i = 0; i < 50 && manifest === undefined; i++) {
    manifest = await hashLocalManifest(model, "org/tiny").catch(() => undefined);
    if (manifest === undefined) await new Promise((r) => setTimeout(r, 200));
  }
  expect(manifest?.files.find((f) => f.path === "weights.bin")?.size).toBe(weightsBytes);
}, 120_000);
