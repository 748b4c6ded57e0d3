/**
 * A full disk at staging: node l1's model_dir is a real tmpfs (mounted as root) smaller than the
 * model, the model pushed from the control host (`source = "push"`). Staging refuses before moving a
 * byte (InsufficientDisk, retried with back-off: not Stalled), nothing is launched, and the node's
 * model dir holds no blob, no `.incomplete` partial and no `.tmp` file however often it is tried.
 * Once the tmpfs is remounted larger, the cluster converges by itself (no `shardctl reconcile`), and
 * the model dir then holds the verified blobs only.
 *
 * And a disk that fills in the middle of the transfer: l1 and l2 share one tmpfs with room for one
 * copy of the model, so each node's free-space check passes and the writes run out of space. Nothing
 * is launched and nothing is recorded in the ledger while it is full; once the tmpfs grows, the
 * partial files are resumed or replaced and the cluster converges by itself with no partial or temp
 * file left.
 */
import { execFile } from "node:child_process";
import { mkdtemp, readdir, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  chat,
  conditionOf,
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  readStatusFile,
  revisionOf,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { enginePids, killPids, ledgerNames, routerBackends } from "./support/world-checks.js";

const run = promisify(execFile);
let world: DaemonWorld;
let daemon: Daemon;
/** The tmpfs mount point: node l1's model_dir. */
let small: string | undefined;
const name = "starved";
/** What the second world (a disk filling mid-transfer) leaves to clean up. */
const cleanups: Array<() => Promise<void>> = [];

/** Every file under `dir` (relative paths), symlinks included. */
async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((e) => !e.isDirectory()).map((e) => join(e.parentPath, e.name).slice(dir.length + 1));
}

/** Bytes of the regular files under `dir`. */
async function bytesUnder(dir: string): Promise<number> {
  let total = 0;
  for (const file of await filesUnder(dir)) {
    const st = await stat(join(dir, file)).catch(() => undefined);
    if (st?.isFile() === true) total += st.size;
  }
  return total;
}

/** A tmpfs of `size` (mount's syntax, "64k") on a fresh temp dir. */
async function mountTmpfs(size: string): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "shardctl-staging-full-"));
  await run("mount", ["-t", "tmpfs", "-o", `size=${size}`, "tmpfs", dir]);
  return dir;
}

async function unmount(dir: string): Promise<void> {
  await run("umount", [dir]).catch(() => undefined);
  await rm(dir, { recursive: true, force: true });
}

/** Point the local nodes' model_dir where `dirs` says (node name → dir). */
async function moveModelDirs(target: DaemonWorld, dirs: Record<string, string>): Promise<void> {
  let settings = await readFile(target.settingsFile, "utf8");
  for (const [node, dir] of Object.entries(dirs)) {
    const was = JSON.stringify(join(target.root, "nodes", node));
    expect(settings).toContain(was);
    settings = settings.replace(was, JSON.stringify(dir));
  }
  await writeFile(target.settingsFile, settings);
}

/** A push-sourced definition of the world's model on l1 and l2, registered with the router when `register`. */
async function pushDefinition(target: DaemonWorld, register = false): Promise<string> {
  const text = definitionText(target, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]), register });
  return text.replace('source = "path"', 'source = "push"');
}

/** Delete the definition, wait for the prune, stop the daemon; what engines and ledger entries are left. */
async function pruneAndStop(target: DaemonWorld, cluster: string, running: Daemon | undefined): Promise<{ left: number[]; ledger: string[] }> {
  await rm(join(target.clustersDir, `${cluster}.toml`), { force: true });
  const deadline = Date.now() + 20_000;
  while ((await readStatusFile(target, cluster).catch(() => undefined)) !== undefined && Date.now() < deadline) await sleep(100);
  await running?.stop();
  const left = await enginePids(target);
  const ledger = await ledgerNames(target);
  killPids(left);
  return { left, ledger };
}

beforeAll(async () => {
  if (process.getuid?.() !== 0) throw new Error("this test mounts a small tmpfs: run it as root");
  world = await startWorld();
  small = await mountTmpfs("64k");
  await writeSettings(world, { enabled: true, router: true });
  // l1's model_dir moves onto the small tmpfs; l2 keeps its roomy one.
  await moveModelDirs(world, { l1: small });
  daemon = await startInProcessDaemon(world);
}, 60_000);

afterAll(async () => {
  const found = world === undefined ? { left: [], ledger: [] } : await pruneAndStop(world, name, daemon);
  if (small !== undefined) await unmount(small);
  await world?.close();
  for (const cleanup of cleanups.reverse()) await cleanup();
  expect(found.left).toEqual([]);
  expect(found.ledger).toEqual([]);
}, 60_000);

describe("a disk too small for the model at staging", () => {
  it("retries InsufficientDisk without writing a byte, and converges by itself once the disk grows", async () => {
    const modelBytes = await bytesUnder(world.modelDir);
    expect(modelBytes).toBeGreaterThan(64 * 1024);
    await writeDefinition(world, name, await pushDefinition(world, true));
    const revision = await revisionOf(world, name);

    const stalled = await waitForStatus(world, name, (s) => s.lastError?.reason === "InsufficientDisk", 30_000);
    expect(stalled.observedRevision).toBe(revision);
    expect(stalled.health).toBe("Progressing");
    expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "False", reason: "RetryingAfterError" });
    expect(conditionOf(stalled, "Staged")?.status).toBe("False");
    expect(conditionOf(stalled, "Ready")?.status).toBe("False");
    expect(JSON.stringify(stalled)).toMatch(/node l1 needs \d+ bytes more at .* but only \d+ bytes are free/);
    // The node's own staging card says why, for the dashboard's row and for anyone reading the file.
    expect(stalled.staging.find((card) => card.node === "l1")).toMatchObject({
      state: "failed",
      reason: "InsufficientDisk",
      message: expect.stringMatching(/needs \d+ bytes more at .* but only \d+ bytes are free/),
    });
    // Nothing launched, nothing recorded.
    expect(await enginePids(world)).toEqual([]);
    expect(await ledgerNames(world)).toEqual([]);
    expect(await routerBackends(world)).not.toContain("url:");
    // Nothing half-written on the small disk: no blob, no partial, no temp file.
    const onSmall = await filesUnder(small!);
    expect(onSmall.filter((f) => /\.(incomplete|tmp)$/.test(f))).toEqual([]);
    expect(onSmall.filter((f) => f.includes("blobs/"))).toEqual([]);

    // Retried with back-off, each try refused before a byte moves: the disk is never written.
    const firstFailure = stalled.lastError!.at;
    await waitForStatus(world, name, (s) => s.lastError?.reason === "InsufficientDisk" && s.lastError.at !== firstFailure, 30_000);
    expect(await filesUnder(small!)).toEqual(onSmall);

    // The disk grows: the next try stages and launches, with no kick.
    await run("mount", ["-o", "remount,size=16m", small!]);
    const ready = await waitForStatus(world, name, (s) => isReadyAt(s, revision) && s.health === "Healthy" && s.stages.every((c) => c.alive), 90_000);
    expect(conditionOf(ready, "Stalled")?.status).toBe("False");
    expect(conditionOf(ready, "Staged")?.status).toBe("True");
    expect(await chat(`http://127.0.0.1:${new URL(ready.coordinator!.url).port}`, world.modelDir)).toBeTypeOf("string");
    // The small disk now holds the verified blobs (and their links), no partial or temp file.
    const staged = await filesUnder(small!);
    expect(staged.filter((f) => /\.(incomplete|tmp)$/.test(f))).toEqual([]);
    expect(staged.filter((f) => f.includes("blobs/")).length).toBeGreaterThan(0);
    expect(await ledgerNames(world)).toEqual([name]);
    expect(await routerBackends(world)).toContain(ready.coordinator!.url);

    // A new model that the disk, shrunk to what it holds, has no room for: l1's card is this
    // staging's (nothing moved), not the served model's bytes carried over as if they were its.
    const used = Number((await run("df", ["-k", "--output=used", small!])).stdout.trim().split("\n").at(-1));
    await run("mount", ["-o", `remount,size=${used + 8}k`, small!]);
    const other = join(world.root, "models", "other-seed");
    await makeTestModel(other, { layers: 4, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 99 });
    await writeDefinition(world, name, (await pushDefinition(world, true)).replace(JSON.stringify(world.modelDir), JSON.stringify(other)));
    const refused = await waitForStatus(world, name, (s) => s.staging.some((card) => card.node === "l1" && card.reason === "InsufficientDisk"), 30_000);
    expect(refused.staging.find((card) => card.node === "l1")).toMatchObject({ state: "failed", bytesDone: 0, bytesTotal: 0 });
    expect(conditionOf(refused, "Ready")).toMatchObject({ status: "True", observedRevision: revision });
    expect(world.audit.problems).toEqual([]);
  }, 180_000);
});

describe("a disk that fills in the middle of the transfer", () => {
  it("launches nothing while it is full, and converges once it grows, with no partial or temp file left", async () => {
    const filling = await startWorld();
    const modelBytes = await bytesUnder(filling.modelDir);
    // Room for one copy and a half: each node's free-space check passes, the second copy cannot fit.
    const sizeKiB = Math.ceil((1.5 * modelBytes) / 1024);
    const shared = await mountTmpfs(`${sizeKiB}k`);
    cleanups.push(async () => {
      await unmount(shared);
      await filling.close();
    });
    await writeSettings(filling, { enabled: true });
    await moveModelDirs(filling, { l1: join(shared, "l1"), l2: join(shared, "l2") });
    const filler = await startInProcessDaemon(filling);
    let stopped = false;
    cleanups.unshift(async () => {
      if (stopped) return;
      const found = await pruneAndStop(filling, "filled", filler);
      expect(found.left).toEqual([]);
    });
    await writeDefinition(filling, "filled", await pushDefinition(filling));
    const revision = await revisionOf(filling, "filled");

    // A disk that fills mid-transfer is retried as one found too small is: not Stalled.
    const failing = await waitForStatus(filling, "filled", (s) => s.lastError?.reason === "InsufficientDisk", 30_000);
    expect(failing.observedRevision).toBe(revision);
    expect(failing.health).toBe("Progressing");
    expect(failing.lastError!.message).toMatch(/filled up while staging|needs \d+ bytes/);
    // The disk did fill. A failed transfer's node lock (a folder, its holder and its beat file, a
    // page each on tmpfs) is removed without holding up the failure, so df may already count those
    // pages free: one run saw 99 % (8 KiB, before the lock had a beat file) where the others saw
    // 100 %. Both nodes' model folders share this disk, so up to two locks' pages (24 KiB): a run
    // under load saw 16 KiB.
    const available = Number((await run("df", ["-k", "--output=avail", shared])).stdout.trim().split("\n").at(-1));
    expect(available).toBeLessThanOrEqual(24);
    // While the disk is full: never Ready, nothing launched, nothing in the ledger, no temp file.
    const end = Date.now() + 3_000;
    while (Date.now() < end) {
      const s = (await readStatusFile(filling, "filled"))!;
      expect(conditionOf(s, "Ready")?.status).not.toBe("True");
      // Progress counts each byte once, however many attempts fetched it.
      for (const node of s.staging) expect(node.bytesDone).toBeLessThanOrEqual(node.bytesTotal);
      expect(await enginePids(filling)).toEqual([]);
      expect(await ledgerNames(filling)).toEqual([]);
      await sleep(250);
    }
    expect((await filesUnder(shared)).filter((f) => f.endsWith(".tmp"))).toEqual([]);

    await run("mount", ["-o", "remount,size=16m", shared]);
    const ready = await waitForStatus(filling, "filled", (s) => isReadyAt(s, revision) && s.health === "Healthy" && s.stages.every((c) => c.alive), 90_000);
    expect(conditionOf(ready, "Staged")?.status).toBe("True");
    const files = await filesUnder(shared);
    expect(files.filter((f) => /\.(incomplete|tmp)$/.test(f))).toEqual([]);
    // Each node holds every blob, whole.
    const blobs = (node: string): string[] => files.filter((f) => f.startsWith(`${node}/`) && f.includes("/blobs/")).map((f) => f.slice(f.lastIndexOf("/") + 1));
    expect(blobs("l1").sort()).toEqual(blobs("l2").sort());
    expect(blobs("l1").length).toBeGreaterThan(0);
    expect(await bytesUnder(join(shared, "l1"))).toBeGreaterThanOrEqual(modelBytes);
    expect(await ledgerNames(filling)).toEqual(["filled"]);
    const found = await pruneAndStop(filling, "filled", filler);
    stopped = true;
    expect(found).toEqual({ left: [], ledger: [] });
    expect(filling.audit.problems).toEqual([]);
  }, 180_000);
});
