/**
 * A node whose run folder is on a full disk (here a real 256 KiB tmpfs, mounted as root). When the
 * last launch's own log filled it (an engine that logs without end), the next launch removes that
 * log before it writes its files, and starts. When something else filled it, the launch fails with
 * LaunchFilesFailed saying the disk is full and how much is free, not that the folder must be
 * writable (SFTP says only "Failure"). A disk that fills under a serving engine only stops its log:
 * it serves on. Needs `npm run build`.
 */
import { execFile } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, it } from "vitest";
import { launchCluster } from "../../src/launch/index.js";
import { launchFailure, makeContext, makeRequest, startLifecycleWorld, tearDownLeft, type LifecycleWorld } from "./lifecycle-fixture.js";

const run = promisify(execFile);
let world: LifecycleWorld;
let small: string;

beforeAll(async () => {
  world = await startLifecycleWorld();
  small = await mkdtemp(join(tmpdir(), "shardctl-full-run-"));
  await run("mount", ["-t", "tmpfs", "-o", "size=256k", "tmpfs", small]);
}, 120_000);
afterAll(async () => {
  await run("umount", [small]).catch(() => undefined);
  await rm(small, { recursive: true, force: true });
  await world?.close();
});

/** Fill the tmpfs with `file` until no byte more fits. */
async function fill(file: string): Promise<void> {
  await run("sh", ["-c", `dd if=/dev/zero of="$1" bs=4k 2>/dev/null; true`, "sh", file]);
  const free = Number((await run("sh", ["-c", `df -Pk "$1" | awk 'NR==2{print $4}'`, "sh", small])).stdout.trim());
  expect(free).toBe(0);
}

it("the last launch's log that filled the disk is removed before the next launch writes its files", async () => {
  await fill(join(small, "stage-0.log"));
  const request = await makeRequest(world, { cluster: "log-filled", register: false });
  request.stages[0]!.runDir = small;
  const context = makeContext(world);
  try {
    await launchCluster(request, context);
    expect(context.events.map((e) => e.step)).toContain("ready");
  } finally {
    await tearDownLeft(world, "log-filled");
  }
}, 90_000);

it("a disk something else filled: LaunchFilesFailed says it is full, with what is free", async () => {
  // What the first launch left (its files, its log) goes: the disk is filled by another file alone.
  await run("sh", ["-c", `rm -rf "$1"/* "$1"/.[!.]*`, "sh", small]);
  await fill(join(small, "somebody-else.bin"));
  const request = await makeRequest(world, { cluster: "disk-full", register: false });
  request.stages[0]!.runDir = small;
  const error = await launchFailure(world, request);
  expect(error.reason).toBe("LaunchFilesFailed");
  expect(error.message).toMatch(
    new RegExp(
      `could not write the launch files in ${small} on node-1: .*; the file system holding it is full \\(0 KiB free\\): free space there \\(the launch is tried again`,
    ),
  );
  expect(await world.ledger.read("disk-full")).toBeUndefined();
}, 90_000);

it("an engine whose log's disk fills while it serves goes on serving; its log grows again once there is room", async () => {
  await run("sh", ["-c", `rm -rf "$1"/* "$1"/.[!.]*`, "sh", small]);
  const request = await makeRequest(world, { cluster: "fills-later", register: false });
  // The coordinator logs a line for every request it answers.
  request.coordinator.runDir = small;
  const context = makeContext(world);
  try {
    const { coordinatorUrl } = await launchCluster(request, context);
    await fill(join(small, "somebody-else.bin"));
    const ask = async (): Promise<number> =>
      (
        await fetch(`${coordinatorUrl}/v1/completions`, {
          method: "POST",
          headers: { "content-type": "application/json" },
          body: JSON.stringify({ model: request.modelName, prompt: "hello", max_tokens: 2 }),
        })
      ).status;
    // Well past what a write buffer holds: each answer is a log line that does not fit.
    const statuses: number[] = [];
    for (let i = 0; i < 40; i++) statuses.push(await ask());
    expect(statuses.every((s) => s === 200)).toBe(true);
    const log = join(small, "coordinator.log");
    const before = (await run("stat", ["-c", "%s", log])).stdout.trim();
    await rm(join(small, "somebody-else.bin"));
    expect(await ask()).toBe(200);
    expect(Number((await run("stat", ["-c", "%s", log])).stdout.trim())).toBeGreaterThan(Number(before));
  } finally {
    await tearDownLeft(world, "fills-later");
  }
}, 120_000);

it("a read-only run folder: LaunchFilesFailed says it is read-only, not full, however little room it has", async () => {
  await run("sh", ["-c", `rm -rf "$1"/* "$1"/.[!.]*`, "sh", small]);
  // The tmpfs is 256 KiB: under the 1 MiB below which a writable one is said full.
  await run("mount", ["-o", "remount,ro", small]);
  try {
    const request = await makeRequest(world, { cluster: "read-only", register: false });
    request.stages[0]!.runDir = small;
    const error = await launchFailure(world, request);
    expect(error.reason).toBe("LaunchFilesFailed");
    expect(error.message).toContain("the file system holding it is read-only: remount it read-write");
    expect(error.message).not.toContain("is full");
  } finally {
    await run("mount", ["-o", "remount,rw", small]);
  }
}, 90_000);
