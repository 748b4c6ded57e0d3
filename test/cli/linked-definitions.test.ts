/**
 * Definitions that are symbolic links (`clusters/b.toml` -> elsewhere): every command and the daemon
 * follow a link to a regular file; a link to nothing, or to a directory, is reported as a broken
 * definition (the daemon and every command see the same definitions).
 */
import { mkdir, rm, symlink, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { loadCluster, loadSettings } from "../../src/spec/index.js";
import {
  conditionOf,
  definitionText,
  revisionOf,
  runShardctl,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { shardctl } from "./support/run-shardctl.js";

let world: DaemonWorld;
let daemon: Daemon | undefined;
let target: string;
const broken = "dangling.toml:1:1: symbolic link to ../elsewhere/gone.toml, which does not exist; point the link at the definition or remove it";

beforeAll(async () => {
  world = await startWorld();
  const elsewhere = join(world.root, "elsewhere");
  await mkdir(elsewhere);
  target = join(elsewhere, "linked.toml");
  await writeFile(target, definitionText(world, { nodes: ["l1", "l2"] }));
  await writeDefinition(world, "plain", definitionText(world, { nodes: ["l2", "l1"], port: 8081 }));
  await symlink("../elsewhere/linked.toml", join(world.clustersDir, "linked.toml"));
  await symlink("../elsewhere/gone.toml", join(world.clustersDir, "dangling.toml"));
  await symlink("../elsewhere", join(world.clustersDir, "folder.toml"));
});
afterAll(async () => {
  await daemon?.stop();
  await world?.close();
});

test("validate <dir>: the linked definition is checked, the dangling link reported with where it points, the link to a directory refused", async () => {
  const run = await shardctl(["validate", "--config", "shardctl.toml", "clusters"], { cwd: world.root });
  expect(run.code).toBe(1);
  expect(run.stderr.split("\n")).toEqual([
    `clusters/${broken}`,
    "clusters/folder.toml:1:1: the cluster definition is a symbolic link to ../elsewhere, which is not a definition (a .toml file): a definition may link only to another definition of its repository, so a committed link cannot show other files of this machine; replace the link with the definition itself",
    "2 problems in 2 files (checked 1 settings file, 4 definitions)",
    "",
  ]);
});

test("plan names the dangling link's target rather than calling the cluster undefined", async () => {
  const plan = await runShardctl(world, ["plan", "dangling"]);
  expect(plan.code).toBe(1);
  expect(plan.stdout + plan.stderr).toContain(broken);
});

test("the daemon, started with the links in place, plans the linked definition, reports the dangling one, and sees edits of the target", async () => {
  daemon = await startInProcessDaemon(world);
  const revision = await revisionOf(world, "linked");
  const linked = await waitForStatus(world, "linked", (s) => conditionOf(s, "Planned")?.status === "True", 20_000);
  expect(linked.observedRevision).toBe(revision);
  const dangling = await waitForStatus(world, "dangling", (s) => conditionOf(s, "Stalled")?.reason === "InvalidDefinition", 20_000);
  expect(conditionOf(dangling, "Stalled")?.message).toContain(broken);
  // An edit of the link's target is an edit of the definition.
  await writeFile(target, definitionText(world, { nodes: ["l1", "l2"], contextLength: 128 }));
  const edited = await revisionOf(world, "linked");
  expect(edited).not.toBe(revision);
  await waitForStatus(world, "linked", (s) => s.observedRevision === edited && conditionOf(s, "Planned")?.status === "True", 20_000);
  await daemon.stop();
  daemon = undefined;
});

test("status lists the linked, the dangling definitions and the link to a directory, as the daemon sees them", async () => {
  const run = await runShardctl(world, ["status"]);
  expect(run.code).toBe(0);
  const names = run.stdout
    .trim()
    .split("\n")
    .slice(1)
    .map((line) => line.split(/\s+/)[0]);
  expect(names).toEqual(["dangling", "folder", "linked", "plain"]);
});

test("diff decides for the linked definition and reports the dangling one", async () => {
  await writeSettings(world, { enabled: true });
  const run = await runShardctl(world, ["diff"]);
  expect(run.code).toBe(1);
  expect(run.stdout).toMatch(/^\+ linked: launch revision [0-9a-f]{12}$/m);
  expect(run.stdout).toMatch(/^\+ plain: launch revision [0-9a-f]{12}$/m);
  expect(run.stderr).toContain(broken);
});

test("a link to a file that is no definition is refused without showing a byte of it; in a git working tree, so is a link out of the tree", async () => {
  await writeFile(join(world.root, "hub.token"), "hf_SECRETSECRET\n");
  const leak = join(world.clustersDir, "leak.toml");
  await symlink("../hub.token", leak);
  try {
    const run = await shardctl(["validate", "--config", "shardctl.toml", "clusters/leak.toml"], { cwd: world.root });
    expect(run.code).toBe(1);
    expect(run.stderr).toContain(
      "clusters/leak.toml:1:1: the cluster definition is a symbolic link to ../hub.token, which is not a definition (a .toml file): a definition may link only to another definition of its repository",
    );
    expect(run.stdout + run.stderr).not.toContain("SECRET");
  } finally {
    await rm(leak);
  }

  // A checkout: its definitions may link within it, not out of it.
  const tree = join(world.root, "checkout");
  await mkdir(join(tree, ".git"), { recursive: true });
  await mkdir(join(tree, "clusters"));
  await mkdir(join(tree, "common"));
  await writeFile(join(tree, "common", "inside.toml"), definitionText(world, { nodes: ["l1", "l2"] }));
  await writeFile(join(world.root, "outside.toml"), 'desired = "hf_SECRETSECRET"\n');
  await symlink("../common/inside.toml", join(tree, "clusters", "inside.toml"));
  await symlink("../../outside.toml", join(tree, "clusters", "outside.toml"));
  const settings = (await loadSettings(world.settingsFile))!;
  expect((await loadCluster(join(tree, "clusters", "inside.toml"), settings)).ok).toBe(true);
  const outside = await loadCluster(join(tree, "clusters", "outside.toml"), settings);
  expect(outside.ok).toBe(false);
  expect(outside.issues.map((i) => i.message)).toEqual([
    `the cluster definition is a symbolic link to ../../outside.toml, outside the git working tree ${tree} that holds the definition: a definition may link only to another definition of its repository, so a committed link cannot show other files of this machine; replace the link with the definition itself`,
  ]);
  // A folder on the way committed as a link (the definitions directory replaced by one) is no way round.
  await mkdir(join(world.root, "foreign"));
  await writeFile(join(world.root, "foreign", "credentials.toml"), 'token = "hf_SECRETSECRET"\n');
  await symlink(join(world.root, "foreign"), join(tree, "linked-folder"));
  const through = await loadCluster(join(tree, "linked-folder", "credentials.toml"), settings);
  expect(through.ok).toBe(false);
  expect(through.issues.map((i) => i.message)).toEqual([
    `the cluster definition is reached through a symbolic link to ${join(world.root, "foreign", "credentials.toml")}, outside the git working tree ${tree} that holds the definition: a definition may link only to another definition of its repository, so a committed link cannot show other files of this machine; replace the link with the definition itself`,
  ]);
});

test("a directory named as a definition is a broken definition for every command: validate fails, status lists it, diff proposes no prune", async () => {
  const folder = join(world.clustersDir, "made.toml");
  await mkdir(folder);
  try {
    const run = await shardctl(["validate", "--config", "shardctl.toml", "clusters"], { cwd: world.root });
    expect(run.code).toBe(1);
    expect(run.stderr).toMatch(/^clusters\/made\.toml:1:1: the cluster definition is a directory/m);
    const status = await runShardctl(world, ["status"]);
    expect(status.stdout).toMatch(/^made\s/m);
    const diff = await runShardctl(world, ["diff"]);
    expect(diff.stdout).not.toMatch(/made: prune/);
    expect(diff.stderr).toContain("made.toml:1:1: the cluster definition is a directory");
  } finally {
    await rm(folder, { recursive: true });
  }
});

test("a directory named as a definition, or a link that loops, made while the daemon runs, gets its status at once: the broken definition reported", async () => {
  daemon = await startInProcessDaemon(world);
  try {
    await mkdir(join(world.clustersDir, "late-folder.toml"));
    await symlink("late-loop.toml", join(world.clustersDir, "late-loop.toml"));
    // Regression: the watch reported no event for either (a directory; a stat that fails), and both
    // stayed "no status yet" until a restart.
    const folder = await waitForStatus(world, "late-folder", (s) => conditionOf(s, "Stalled")?.reason === "InvalidDefinition", 10_000);
    expect(conditionOf(folder, "Stalled")?.message).toContain("late-folder.toml:1:1: the cluster definition is a directory");
    const loop = await waitForStatus(world, "late-loop", (s) => conditionOf(s, "Stalled")?.reason === "InvalidDefinition", 10_000);
    expect(conditionOf(loop, "Stalled")?.message).toContain("late-loop.toml:1:1: symbolic link to late-loop.toml, which loops back on itself");
  } finally {
    await rm(join(world.clustersDir, "late-folder.toml"), { recursive: true, force: true });
    await rm(join(world.clustersDir, "late-loop.toml"), { force: true });
    await daemon.stop();
    daemon = undefined;
  }
});
