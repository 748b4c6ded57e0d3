/**
 * `shardctl reconcile` when the daemon's state directory takes no writes (read-only, as a bind mount
 * makes it for root too): one line naming the directory and what to do, exit 1, no stack trace.
 */
import { execFile } from "node:child_process";
import { mkdir } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, beforeAll, expect, test } from "vitest";
import { definitionText, runShardctl, startWorld, writeDefinition, type DaemonWorld } from "../reconciler/daemon-fixture.js";

const run = promisify(execFile);
let world: DaemonWorld;
beforeAll(async () => {
  world = await startWorld();
});
afterAll(async () => {
  await world?.close();
});

test("a read-only state directory: the request is refused in one line naming it, exit 1", async () => {
  if (process.getuid?.() !== 0) throw new Error("this test bind-mounts the state directory read-only: run it as root");
  await writeDefinition(world, "asked", definitionText(world, { nodes: ["l1", "l2"] }));
  await mkdir(world.stateDir, { recursive: true });
  await run("mount", ["--bind", world.stateDir, world.stateDir]);
  try {
    await run("mount", ["-o", "remount,ro,bind", world.stateDir]);
    const asked = await runShardctl(world, ["reconcile", "asked"]);
    expect(asked.code).toBe(1);
    expect(asked.stderr).toContain(`cannot write the reconcile request for asked in ${join(world.stateDir, "requests")}, where the daemon takes them`);
    expect(asked.stderr).toMatch(/state_dir\) must be writable/);
    expect(asked.stderr).not.toMatch(/^\s+at /m);
  } finally {
    await run("umount", [world.stateDir]);
  }
});
