/**
 * The control machine's disk full under the daemon's state directory while a cluster runs: a
 * relaunch that cannot record itself in the ledger starts nothing, says StateDirUnwritable naming
 * the disk, its room and what to do, is retried with back-off without spending the restart budget, and serves
 * once there is room. The disk is a real 1 MiB tmpfs under the ledger, filled for real (this runs
 * as root).
 */
import { execFile } from "node:child_process";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterAll, expect, test } from "vitest";
import { killStage, readStatusFile, removeDefinition, sleep, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const run = promisify(execFile);
let mounted: string | undefined;

// When the test failed before it could: the world's clean-up then finds the folder it removes.
afterAll(async () => {
  if (mounted !== undefined) await run("umount", ["-l", mounted]).catch(() => undefined);
});

const dw = useDaemonWorld({ settings: { enabled: true, restartBudget: 2 }, daemon: "none" });

test("the state_dir's disk full: a relaunch starts nothing, says StateDirUnwritable naming the disk and its room, is retried uncounted, and serves once there is room", async () => {
  const { world } = dw;
  const ledger = join(world.stateDir, "ledger");
  await mkdir(ledger, { recursive: true });
  await run("mount", ["-t", "tmpfs", "-o", "size=1m", "tmpfs", ledger]).catch((error: Error) => {
    throw new Error(`this test fills a small tmpfs, which needs root and mount(8): ${error.message}`, { cause: error });
  });
  mounted = ledger;
  await dw.startDaemon();
  const revision = await dw.define("full-state", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("full-state", revision);
  const fill = join(ledger, ".fill");
  try {
    await run("sh", ["-c", `dd if=/dev/zero of=${fill} bs=64k 2>/dev/null; true`]);
    await killStage(serving, 1);
    const refused = await waitForStatus(world, "full-state", (s) => s.lastError?.reason === "StateDirUnwritable", 90_000);
    // Refused before anything starts: a launch run whole would fail at its last record, each try.
    expect(refused.lastError!.message).toMatch(
      new RegExp(`^the disk holding ${ledger} has \\d+ KiB free, less than a launch needs to record itself \\(64 KiB\\): nothing was started; free space`),
    );
    expect(refused.lastError!.message).toContain("not counted against the restart budget");
    // Tried again with back-off, and a budget of 2 would be spent by one more counted launch: none was.
    await sleep(5_000);
    const later = (await readStatusFile(world, "full-state"))!;
    expect(later.restarts?.count).toBe(1);
    expect(later.health).not.toBe("Stalled");
    expect(later.lastError?.reason).toBe("StateDirUnwritable");
  } finally {
    await rm(fill, { force: true });
  }
  const back = await dw.waitServing("full-state", revision, 90_000);
  expect(back.restarts?.count).toBe(2);
  // Removed while its ledger is on the small disk, which then goes with the daemon.
  expect(await removeDefinition(world, "full-state", 60_000)).toBe(true);
  await dw.stopDaemon();
  await run("umount", [ledger]);
  mounted = undefined;
}, 240_000);
