/**
 * On a machine other users share, nothing the daemon acts on may be theirs to write: its ledger
 * decides which pids it signals and which folders it removes, a run folder's fixed names (exit
 * files, logs) are written by the daemon's user. A real daemon started with umask 000 makes nothing
 * writable by group or others; a run folder that another user owns (made before the node's
 * model_dir existed, say) is refused with RunFolderUnsafe, not written, not counted against the
 * restart budget, and launched once it is the node's user's again.
 */
import { chmod, chown, lstat, mkdir, readdir, rm, stat, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import {
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  revisionOf,
  runShardctl,
  spawnDaemon,
  startWorld,
  waitForStatus,
  waitWatching,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
  type SpawnedDaemon,
} from "./daemon-fixture.js";

let world: DaemonWorld;
let daemon: SpawnedDaemon | undefined;

beforeAll(async () => {
  world = await startWorld();
  await writeSettings(world, { enabled: true });
  // A ledger folder an earlier daemon made under umask 000: writable by all until this one starts.
  await mkdir(join(world.stateDir, "ledger"), { recursive: true });
  await chmod(join(world.stateDir, "ledger"), 0o777);
  // The daemon as a service manager or a careless shell might start it: umask 000.
  daemon = await spawnDaemon(world, {}, { umask: "000" });
  await waitWatching(daemon);
}, 60_000);

afterAll(async () => {
  if (daemon !== undefined && daemon.child.exitCode === null) {
    daemon.child.kill("SIGTERM");
    await daemon.exited;
  }
  await world?.close();
});

/** Every path under `dir` (itself included) whose mode lets group or others write, with its mode. */
async function writableByOthers(dir: string): Promise<string[]> {
  const found: string[] = [];
  const visit = async (path: string): Promise<void> => {
    const info = await lstat(path);
    if (info.isSymbolicLink()) return;
    if ((info.mode & 0o022) !== 0) found.push(`${path} ${(info.mode & 0o777).toString(8)}`);
    if (info.isDirectory()) for (const name of await readdir(path)) await visit(join(path, name));
  };
  await visit(dir);
  return found;
}

test("a daemon started with umask 000 makes nothing writable by group or others: state, ledger, run folders, logs, lock", async () => {
  const text = definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]), modelSource: "push" });
  await writeDefinition(world, "modes", text);
  const revision = await revisionOf(world, "modes");
  await waitForStatus(world, "modes", (s) => isReadyAt(s, revision), 90_000);
  expect(await writableByOthers(world.stateDir)).toEqual([]);
  expect(await writableByOthers(join(world.root, "nodes"))).toEqual([]);
  expect(await writableByOthers(join(world.clustersDir, ".shardctl-daemon.lock"))).toEqual([]);
  expect(await removeDefinition(world, "modes", 30_000)).toBe(true);
}, 150_000);

test("a run folder another user owns is refused (RunFolderUnsafe, not counted) and launched once it is the node's user's", async () => {
  const runDir = join(world.root, "nodes", "l2", ".shardctl", "run", "theirs");
  await mkdir(runDir, { recursive: true });
  await chown(runDir, 65534, 65534);
  const text = definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) });
  await writeDefinition(world, "theirs", text);
  const refused = await waitForStatus(world, "theirs", (s) => s.lastError?.reason === "RunFolderUnsafe", 60_000);
  // Named as the system names uid 65534 (nobody, nfsnobody) or by the number.
  expect(refused.lastError!.message).toMatch(new RegExp(`${runDir.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")} belongs to another user \\((nobody|nfsnobody|65534)\\)`));
  expect(refused.restarts?.count ?? 0).toBe(0);
  // Nothing was written in it.
  expect(await readdir(runDir)).toEqual([]);
  await chown(runDir, 0, 0);
  const revision = await revisionOf(world, "theirs");
  const ready = await waitForStatus(world, "theirs", (s) => isReadyAt(s, revision), 90_000);
  expect(ready.restarts?.count).toBe(1);
  expect((await stat(runDir)).uid).toBe(0);
  expect(await removeDefinition(world, "theirs", 30_000)).toBe(true);
}, 200_000);

test("a ledger file another user owns is not acted on; a state directory another user owns keeps the daemon from starting", async () => {
  // Written by someone else: its pids and folders are theirs to choose.
  const forged = join(world.stateDir, "ledger", "forged.json");
  await writeFile(
    forged,
    JSON.stringify({
      cluster: "forged",
      revision: "a".repeat(64),
      phase: "running",
      startedAt: "2026-12-06T10:00:00.000Z",
      processes: [],
      ports: [],
      owner: world.clustersDir,
    }),
  );
  await chown(forged, 65534, 65534);
  const read = await new Ledger(world.stateDir).read("forged").catch((e: unknown) => e as { reason?: string; message: string });
  expect(read).toMatchObject({ reason: "LedgerEntryUnreadable" });
  expect((read as Error).message).toContain("it belongs to uid 65534, not to the daemon's user (uid 0): another user wrote it");
  await rm(forged);

  daemon!.child.kill("SIGTERM");
  await daemon!.exited;
  await chown(world.stateDir, 65534, 65534);
  try {
    const again = await runShardctl(world, ["daemon", "--config", world.settingsFile, "--dir", world.clustersDir], 30_000);
    expect(again.code).toBe(1);
    expect(again.stderr).toContain(`[daemon] state_dir: ${world.stateDir} belongs to uid 65534, not to the daemon's user (uid 0)`);
  } finally {
    await chown(world.stateDir, 0, 0);
  }
}, 60_000);
