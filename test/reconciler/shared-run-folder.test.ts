/**
 * Two daemons with separate state directories, each defining a cluster of the same name on the same
 * nodes (the same model_dir): the cluster's run folder there is one path. The second daemon's
 * launch must not stop the first one's engines as leftovers of its own, nor write over its files:
 * it fails RunFolderClaimed, naming the other daemon, retried with back-off and not counted; once the
 * first cluster is removed, the second launches; a claim whose engines are gone is taken over once it
 * is not fresh. Both daemons run in this process on two local nodes.
 */
import { mkdir, readFile, rmdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, expect, test } from "vitest";
import { startDaemon, type Daemon } from "../../src/reconciler/index.js";
import {
  conditionOf,
  definitionText,
  fastLaunch,
  fastMonitor,
  removeDefinition,
  revisionOf,
  waitForStatus,
  writeDefinition,
  type DaemonWorld,
} from "./daemon-fixture.js";
import { isServingAt, useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });
let other: { world: DaemonWorld; daemon: Daemon } | undefined;

afterAll(async () => {
  if (other === undefined) return;
  await removeDefinition(other.world, "shared", 60_000);
  await other.daemon.stop();
});

/** A second daemon's world beside the first: its own definitions and state directory, the same node registry. */
async function startOtherDaemon(world: DaemonWorld): Promise<{ world: DaemonWorld; daemon: Daemon }> {
  const root = join(world.root, "other");
  const otherWorld: DaemonWorld = { ...world, root, clustersDir: join(root, "clusters"), stateDir: join(root, "state"), settingsFile: join(root, "shardctl.toml") };
  await mkdir(otherWorld.clustersDir, { recursive: true });
  const settings = (await readFile(world.settingsFile, "utf8")).replace(
    `state_dir = ${JSON.stringify(world.stateDir)}`,
    `state_dir = ${JSON.stringify(otherWorld.stateDir)}`,
  );
  expect(settings).toContain(otherWorld.stateDir);
  await writeFile(otherWorld.settingsFile, settings);
  const log = pino({ level: "debug" }, pino.destination({ dest: join(root, "daemon.log"), sync: true }));
  const daemon = await startDaemon({
    dir: otherWorld.clustersDir,
    settingsFile: otherWorld.settingsFile,
    log,
    resyncMs: 60_000,
    debounceMs: 50,
    launchDeadlines: fastLaunch,
    monitor: fastMonitor,
  });
  return { world: otherWorld, daemon };
}

test("a second daemon's cluster of the same name on the same nodes waits for the run folder and touches nothing of the first", async () => {
  const { world } = dw;
  const first = await dw.define("shared", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("shared", first);
  const pids = serving.stages.map((s) => s.pid);
  const runDir = join(world.root, "nodes", "l1", ".shardctl", "run", "shared");
  expect(JSON.parse(await readFile(join(runDir, "claim.json"), "utf8"))).toMatchObject({ stateDir: world.stateDir, definitions: world.clustersDir });

  other = await startOtherDaemon(world);
  const addresses = await dw.freeAddresses();
  await writeDefinition(other.world, "shared", definitionText(other.world, { nodes: ["l1", "l2"], ...addresses }));
  const second = await revisionOf(other.world, "shared");
  const refused = await waitForStatus(other.world, "shared", (s) => s.lastError?.reason === "RunFolderClaimed", 60_000);
  expect(refused.lastError?.message).toContain(world.stateDir);
  expect(refused.lastError?.message).toContain(world.clustersDir);
  expect(refused.lastError?.message).toMatch(/rename one of the two clusters/);
  // Given back: never counted, so the budget does not run out while the first cluster serves.
  expect(refused.restarts?.count ?? 0).toBe(0);
  // Through the retries (its back-off starts at a second), the first cluster serves on untouched.
  await new Promise((resolve) => setTimeout(resolve, 4_000));
  const still = await waitForStatus(world, "shared", (s) => isServingAt(s, first), 5_000);
  expect(still.stages.map((s) => s.pid)).toEqual(pids);
  expect(conditionOf(still, "Ready")?.status).toBe("True");
  expect(JSON.parse(await readFile(join(runDir, "claim.json"), "utf8"))).toMatchObject({ stateDir: world.stateDir });

  // The first cluster removed (its folders with it): the second daemon's cluster launches there.
  expect(await removeDefinition(world, "shared", 60_000)).toBe(true);
  await waitForStatus(other.world, "shared", (s) => isServingAt(s, second), 90_000);
  expect(JSON.parse(await readFile(join(runDir, "claim.json"), "utf8"))).toMatchObject({ stateDir: other.world.stateDir });
}, 240_000);

test("a claim whose engines are gone is taken over once it is not fresh (a launch may be between its claim and its first process)", async () => {
  const { world } = dw;
  const runDir = join(world.root, "nodes", "l2", ".shardctl", "run", "gone");
  await mkdir(runDir, { recursive: true });
  const claimed = (at: Date) => JSON.stringify({ host: "elsewhere", stateDir: "/var/lib/old-shardctl", definitions: "/srv/old/clusters", at: at.toISOString() });
  // A claim that cannot be read (a directory in its place: the read fails as a silent node's
  // would) is never taken for none.
  await mkdir(join(runDir, "claim.json"));
  const revision = await dw.define("gone", { nodes: ["l1", "l2"] });
  const unreadable = await waitForStatus(world, "gone", (s) => s.lastError?.reason === "RunFolderClaimed", 60_000);
  expect(unreadable.lastError?.message).toMatch(/whether another daemon claimed it could not be read/);
  await rmdir(join(runDir, "claim.json"));
  await writeFile(join(runDir, "claim.json"), claimed(new Date()));
  const refused = await waitForStatus(world, "gone", (s) => /may be starting/.test(s.lastError?.message ?? ""), 60_000);
  expect(refused.lastError?.message).toMatch(/claimed it \d+ s ago and may be starting/);
  expect(refused.lastError?.message).toContain("/var/lib/old-shardctl");
  // An hour old, and still nothing runs from it: the next try takes it.
  await writeFile(join(runDir, "claim.json"), claimed(new Date(Date.now() - 3_600_000)));
  const serving = await dw.waitServing("gone", revision, 90_000);
  expect(JSON.parse(await readFile(join(runDir, "claim.json"), "utf8"))).toMatchObject({ stateDir: world.stateDir });
  const said = serving.timeline.find((e) => e.step === "run-folder-taken-over");
  expect(said?.detail).toContain("/var/lib/old-shardctl");
}, 180_000);
