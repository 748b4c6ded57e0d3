/**
 * `[daemon] state_dir` edited while the daemon runs (a checkout of a commit that moved it): the
 * daemon keeps the state directory it started with — its ledger of what runs, its requests — says
 * so in its log, and the serving cluster goes on untouched; `shardctl reconcile` still reaches it.
 * The daemon runs in this process on two local nodes.
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { removeDefinition, runShardctl, sleep, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { isServingAt, useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("a state_dir edited under a running daemon is kept as it started, said in its log; the cluster serves on untouched", async () => {
  const { world } = dw;
  const revision = await dw.define("kept", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("kept", revision);
  const pids = serving.stages.map((s) => s.pid);

  const moved = join(world.root, "state-moved");
  const settings = await readFile(world.settingsFile, "utf8");
  await writeFile(world.settingsFile, settings.replace(`state_dir = ${JSON.stringify(world.stateDir)}`, `state_dir = ${JSON.stringify(moved)}`));
  // A pass reads the settings again: the definition written anew (the same text) asks for one.
  await writeDefinition(world, "kept", await readFile(join(world.clustersDir, "kept.toml"), "utf8"));
  const deadline = Date.now() + 20_000;
  const log = () => readFile(join(world.root, "daemon.log"), "utf8");
  while (!(await log()).includes("state_dir changed in the settings file while the daemon runs") && Date.now() < deadline) await sleep(100);
  expect(await log()).toContain("state_dir changed in the settings file while the daemon runs");
  await sleep(2_000);
  const still = await waitForStatus(world, "kept", (s) => isServingAt(s, revision), 5_000);
  expect(still.stages.map((s) => s.pid)).toEqual(pids);

  // `shardctl reconcile` reads the edited settings, but drops its request where the running daemon
  // takes them (its lock names the state directory it runs with).
  expect((await runShardctl(world, ["reconcile", "kept"], 30_000)).code).toBe(0);
  expect((await waitForStatus(world, "kept", (s) => isServingAt(s, revision), 30_000)).stages.map((s) => s.pid)).toEqual(pids);
  await writeFile(world.settingsFile, settings);
}, 120_000);

test("a state_dir moved while the daemon was stopped: the next daemon, whose ledger is empty, relaunches the cluster from its run folders (its own claim), not RunFolderClaimed for ever", async () => {
  const { world } = dw;
  const revision = await dw.define("moved", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("moved", revision);
  await dw.stopDaemon();
  const settings = await readFile(world.settingsFile, "utf8");
  const moved = join(world.root, "state-moved-away");
  await writeFile(world.settingsFile, settings.replace(`state_dir = ${JSON.stringify(world.stateDir)}`, `state_dir = ${JSON.stringify(moved)}`));
  await dw.startDaemon();
  const relaunched = await waitForStatus(world, "moved", (s) => isServingAt(s, revision) && s.stages[0]?.pid !== serving.stages[0]?.pid, 60_000);
  expect(relaunched.history.some((h) => h.reason === "RunFolderClaimed")).toBe(false);
  // The earlier run's processes were stopped as leftovers of its folders: one engine set runs.
  for (const pid of serving.stages.map((s) => s.pid)) expect(() => process.kill(pid!, 0)).toThrow();
  // Pruned by this daemon; the old state directory's entry (its processes gone) is forgotten with it.
  expect(await removeDefinition(world, "moved", 30_000)).toBe(true);
  await new Ledger(world.stateDir).remove("moved");
  await dw.stopDaemon();
  await writeFile(world.settingsFile, settings);
  await dw.startDaemon();
}, 150_000);
