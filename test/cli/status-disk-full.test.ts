/**
 * The disk under the status files full while the daemon runs. Its heartbeat only sets a time on its
 * lock, which a full disk does not refuse, so it is not silent; but what the files say may be old.
 * `shardctl status` says so, naming the folder and the room left, and so does a `wait` that times
 * out; once there is room the daemon writes the cluster's latest status again by itself within
 * seconds, not at its next resync. A real 1 MiB tmpfs under the definitions, filled
 * for real (this runs as root).
 */
import { execFile } from "node:child_process";
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { definitionText, runShardctl, startInProcessDaemon, startWorld, waitForStatus, writeDefinition, type DaemonWorld } from "../reconciler/daemon-fixture.js";

const run = promisify(execFile);
let world: DaemonWorld | undefined;
let daemon: Daemon | undefined;
let mounted: string | undefined;

afterAll(async () => {
  await daemon?.stop();
  if (mounted !== undefined) await run("umount", ["-l", mounted]).catch(() => undefined);
  await world?.close();
}, 60_000);

test("a full disk under the status files: status and a wait that times out warn, and the daemon writes the latest status once there is room", async () => {
  world = await startWorld();
  const dir = world.clustersDir;
  await run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", dir]).catch((error: Error) => {
    throw new Error(`this test fills a small tmpfs, which needs root and mount(8): ${error.message}`, { cause: error });
  });
  mounted = dir;
  await writeDefinition(world, "w", definitionText(world, { nodes: ["l1", "l2"] }));
  // Resync far away: a status written again after the disk has room is the retry's, not a pass's.
  daemon = await startInProcessDaemon(world, 600_000);
  const planned = await waitForStatus(world, "w", (s) => s.conditions.some((c) => c.type === "Planned" && c.status === "True"));
  const statusFile = join(dir, "w.status.json");
  expect((await runShardctl(world, ["status"])).stderr).toBe("");

  const fill = join(dir, ".fill");
  await run("sh", ["-c", `dd if=/dev/zero of=${fill} bs=4k 2>/dev/null; true`]);
  try {
    const listed = await runShardctl(world, ["status"]);
    expect(listed.code).toBe(0);
    expect(listed.stderr).toContain(`warning: the file system holding ${dir} has 0 B free, less than a status file takes`);
    expect(listed.stderr).toContain('may be unable to write its status files there (its log says "could not write the status file" when it is); free space');
    // A wait that times out says it too (one met is met: a status that did not change needed no write).
    const waited = await runShardctl(world, ["wait", "w", "--for", "condition=Planned", "--revision", "deadbeef", "--timeout", "1s"]);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain(`; the file system holding ${dir} has 0 B free`);

    // A pass now composes a newer status (a reconcile request is in its history), which the disk refuses.
    const before = await readFile(statusFile, "utf8");
    expect((await runShardctl(world, ["reconcile", "w"])).code).toBe(0);
    const log = join(world.root, "daemon.log");
    await expect.poll(async () => (await readFile(log, "utf8")).includes("could not write the status file"), { timeout: 20_000 }).toBe(true);
    expect(await readFile(statusFile, "utf8")).toBe(before);
  } finally {
    await rm(fill, { force: true });
  }
  const written = await waitForStatus(world, "w", (s) => JSON.stringify(s) !== JSON.stringify(planned), 20_000);
  expect(written.conditions.find((c) => c.type === "Planned")?.status).toBe("True");
  expect((await runShardctl(world, ["status"])).stderr).toBe("");
  expect((await runShardctl(world, ["wait", "w", "--for", "condition=Planned", "--timeout", "5s"])).code).toBe(0);
  await daemon.stop();
  daemon = undefined;
  await run("umount", [dir]);
  mounted = undefined;
}, 120_000);
