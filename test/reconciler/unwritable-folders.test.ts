/**
 * Folders the daemon must write but cannot: its state directory, and the folder of the router's
 * YAML (the config is replaced by renaming a new file over it; the relaunch marks sit beside it).
 * Found as the daemon starts, it refuses to start, naming the setting; found at a registration
 * (the folder made read-only while the daemon runs), the launch is torn down and tried again
 * without spending the restart budget, and serves once the folder takes writes again. The folders
 * are made read-only for real: read-only bind mounts (this runs as root, whom permission bits do
 * not stop).
 */
import { execFile } from "node:child_process";
import { copyFile, mkdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { promisify } from "node:util";
import { afterEach, expect, test } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { readStatusFile, sleep, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const run = promisify(execFile);

const dw = useDaemonWorld({ settings: { enabled: true, router: true, restartBudget: 2 }, daemon: "none" });

/** Read-only bind mounts made by a test, undone after it. */
const mounted: string[] = [];

/** Make `dir` read-only (EROFS for every write, root's too) until the test ends or `writable` is called. */
async function readOnly(dir: string): Promise<void> {
  try {
    await run("mount", ["--bind", dir, dir]);
    mounted.push(dir);
    await run("mount", ["-o", "remount,bind,ro", dir]);
  } catch (error) {
    throw new Error(`this test makes folders read-only with read-only bind mounts, which needs root and mount(8): ${(error as Error).message}`, { cause: error });
  }
}

async function writable(dir: string): Promise<void> {
  const at = mounted.lastIndexOf(dir);
  if (at < 0) return;
  mounted.splice(at, 1);
  await run("umount", [dir]);
}

afterEach(async () => {
  for (const dir of mounted.reverse()) await run("umount", [dir]).catch(() => undefined);
  mounted.length = 0;
});

/** Move the router's YAML into a folder of its own (so that folder alone can be made read-only); returns the folder. */
async function routerConfigInItsOwnFolder(): Promise<string> {
  const { world } = dw;
  const folder = join(world.root, "router");
  await mkdir(folder, { recursive: true });
  const moved = join(folder, "router.yaml");
  await copyFile(world.routerConfig, moved);
  const settings = await readFile(world.settingsFile, "utf8");
  await writeFile(world.settingsFile, settings.replace(`config = ${JSON.stringify(world.routerConfig)}`, `config = ${JSON.stringify(moved)}`));
  return folder;
}

test("a state_dir that takes no writes: the daemon refuses to start, naming the setting; nothing runs", async () => {
  const { world } = dw;
  await mkdir(world.stateDir, { recursive: true });
  await readOnly(world.stateDir);
  const revision = await dw.define("early", { nodes: ["l1", "l2"] });
  expect(revision).toMatch(/^[0-9a-f]+$/);
  const failure = await dw.startDaemon().then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(isShardctlError(failure, "StateDirUnwritable"), String(failure)).toBe(true);
  const message = (failure as Error).message;
  expect(message).toContain(`${world.settingsFile}: [daemon] state_dir ${world.stateDir} cannot be written by the daemon's user (`);
  expect(message).toMatch(/read-only file system/i);
  expect(message).toContain("make that folder writable by");
  // No pass ran: a pass writes the status within moments.
  await sleep(1_000);
  expect(await readStatusFile(world, "early")).toBeUndefined();
  await writable(world.stateDir);
  await dw.startDaemon();
  await dw.waitServing("early", revision, 60_000);
  await dw.stopDaemon();
}, 120_000);

test("the router config's folder takes no writes: refused at start; made read-only while the daemon runs, launches are retried uncounted and serve once it takes writes", async () => {
  const { world } = dw;
  const folder = await routerConfigInItsOwnFolder();
  await readOnly(folder);
  const failure = await dw.startDaemon().then(
    () => undefined,
    (error: unknown) => error,
  );
  expect(isShardctlError(failure, "RouterConfigUnwritable"), String(failure)).toBe(true);
  expect((failure as Error).message).toContain(`: [router] config ${join(folder, "router.yaml")}: the daemon's user (`);
  expect((failure as Error).message).toContain(`cannot create files in ${folder}: `);
  await writable(folder);

  // Writable as the daemon starts, read-only by the first registration.
  await dw.startDaemon();
  try {
    await readOnly(folder);
    const revision = await dw.define("blocked-router", { nodes: ["l1", "l2"], register: true });
    // Three failed registrations with a budget of 2: none counted, the cluster not stalled.
    const refused = await waitForStatus(
      world,
      "blocked-router",
      (s) => (s.restarts?.evidence.filter((e) => e.reason === "RouterConfigUnwritable").length ?? 0) >= 3,
      90_000,
    );
    expect(refused.restarts?.count ?? 0).toBe(0);
    expect(refused.health).not.toBe("Stalled");
    expect(refused.lastError?.message).toMatch(/the daemon's user must be able to create files/);
    await writable(folder);
    const serving = await dw.waitServing("blocked-router", revision, 90_000);
    expect(serving.restarts?.count).toBe(1);
  } finally {
    await writable(folder);
  }
}, 240_000);
