/** `shardctl diff`: desired (definitions) vs observed (the ledger): exit 0 none, 2 changes, 1 error. */
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { definitionText, revisionOf, runShardctl, startWorld, writeDefinition, writeSettings, type DaemonWorld } from "../reconciler/daemon-fixture.js";

let world: DaemonWorld;
beforeAll(async () => {
  world = await startWorld();
  await writeDefinition(world, "d1", definitionText(world, { nodes: ["l1", "l2"] }));
});
afterAll(async () => {
  await world?.close();
});

const entry = (cluster: string, revision: string) => ({
  cluster,
  revision,
  phase: "running" as const,
  startedAt: new Date().toISOString(),
  processes: [],
  ports: [],
});

test("exit 0 when nothing differs (distributed disabled, nothing runs)", async () => {
  const r = await runShardctl(world, ["diff"]);
  expect(r.code).toBe(0);
  expect(r.stdout).toContain("no differences");
});

test("exit 2 with what would change: launch, replace, stop, prune", async () => {
  await writeSettings(world, { enabled: true });
  const launch = await runShardctl(world, ["diff"]);
  expect(launch.code).toBe(2);
  expect(launch.stdout).toMatch(/^\+ d1: launch revision [0-9a-f]{12}$/m);

  const ledger = new Ledger(world.stateDir);
  await ledger.write(entry("d1", "0".repeat(64)));
  const replace = await runShardctl(world, ["diff", "d1"]);
  expect(replace.code).toBe(2);
  expect(replace.stdout).toMatch(/^~ d1: replace revision 000000000000 with [0-9a-f]{12}$/m);

  await ledger.write(entry("d1", await revisionOf(world, "d1")));
  await ledger.write(entry("orphan", "1".repeat(64)));
  const prune = await runShardctl(world, ["diff"]);
  expect(prune.code).toBe(2);
  expect(prune.stdout).toMatch(/^- orphan: prune/m);
  expect(prune.stdout).not.toMatch(/d1/);
  // Looking at one file only never proposes a prune.
  expect((await runShardctl(world, ["diff", "d1"])).code).toBe(0);

  await writeDefinition(world, "d1", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
  const stop = await runShardctl(world, ["diff", "d1"]);
  expect(stop.code).toBe(2);
  expect(stop.stdout).toMatch(/^- d1: stop \(desired = "stopped"\)$/m);
  await ledger.remove("d1");
  await ledger.remove("orphan");
  expect((await runShardctl(world, ["diff"])).code).toBe(0);
});

test("exit 1 on an invalid definition, with file:line:col", async () => {
  await writeFile(join(world.clustersDir, "broken.toml"), 'desired = "sideways"\nnodes = ["l1"]\n[model]\nid = "x"\n');
  const r = await runShardctl(world, ["diff"]);
  expect(r.code).toBe(1);
  expect(r.stderr).toMatch(/broken\.toml:1:11: /);
  await rm(join(world.clustersDir, "broken.toml"));
});
