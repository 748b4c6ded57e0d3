/**
 * `[daemon] state_dir` edited while the daemon runs (a checkout of a commit that moved it): the
 * daemon keeps the state directory it started with — its ledger of what runs, its requests — says
 * so in its log, and the serving cluster goes on untouched; `shardctl reconcile` still reaches it.
 * The daemon runs in this process on two local nodes.
 */
import { readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
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

test("a state_dir moved while the daemon was stopped: the next daemon, whose ledger is empty, touches nothing of what runs and says what to do (move the old directory's contents, or set it back); moved, it adopts", async () => {
  const { world } = dw;
  const revision = await dw.define("moved", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("moved", revision);
  await dw.stopDaemon();
  const settings = await readFile(world.settingsFile, "utf8");
  const moved = join(world.root, "state-moved-away");
  await writeFile(world.settingsFile, settings.replace(`state_dir = ${JSON.stringify(world.stateDir)}`, `state_dir = ${JSON.stringify(moved)}`));
  await dw.startDaemon();
  const refused = await waitForStatus(world, "moved", (s) => s.conditions.some((c) => c.reason === "RunFolderClaimed"), 30_000);
  const said = refused.conditions.find((c) => c.reason === "RunFolderClaimed")!.message;
  expect(said).toContain(`was claimed by this directory's daemon with state_dir ${world.stateDir} (it is ${moved} now)`);
  expect(said).toContain(`move the contents of ${world.stateDir} to ${moved} (or set state_dir back)`);
  // Nothing of it was touched.
  for (const pid of serving.stages.map((s) => s.pid)) expect(() => process.kill(pid!, 0)).not.toThrow();
  // As the message says: stopped, moved, started: adopted, the same processes.
  await dw.stopDaemon();
  await rm(moved, { recursive: true, force: true });
  await rename(world.stateDir, moved);
  await dw.startDaemon();
  const adopted = await waitForStatus(world, "moved", (s) => isServingAt(s, revision) && s.health === "Healthy", 30_000);
  expect(adopted.stages.map((s) => s.pid)).toEqual(serving.stages.map((s) => s.pid));
  expect(await removeDefinition(world, "moved", 30_000)).toBe(true);
  await dw.stopDaemon();
  // Back where the world keeps it (what the stopped daemon left there meanwhile holds nothing running).
  await rm(world.stateDir, { recursive: true, force: true });
  await rename(moved, world.stateDir);
  await writeFile(world.settingsFile, settings);
  await dw.startDaemon();
}, 150_000);
