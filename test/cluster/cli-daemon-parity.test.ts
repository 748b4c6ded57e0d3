/**
 * `shardctl plan --probe` and `shardctl stage` make the same plan and put the same files on the
 * same nodes as the daemon does before a launch, on the same inputs: a sharded model from the Hub
 * stand-in, two local nodes and the coordinator on the control machine. Run `npm run build` first.
 */
import { createHash } from "node:crypto";
import { mkdir, readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/index.js";
import type { Daemon } from "../../src/reconciler/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import {
  enginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  readStatusFile,
  revisionOf,
  runShardctl,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";

const repo = "test-org/sharded";
const commit = "5".repeat(40);
let world: DaemonWorld;
let hub: HubServer;
let daemon: Daemon | undefined;

beforeAll(async () => {
  world = await startWorld();
  const modelDir = join(world.root, "models", "sharded");
  await makeTestModel(modelDir, { layers: 4, shards: 2, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 21 });
  hub = await startHubServer({ repos: [{ repo, commit, dir: modelDir }] });
  await writeSettings(world, { enabled: true });
  await writeFile(world.settingsFile, `[hub]\nendpoint = "${hub.endpoint}"\n\n${await readFile(world.settingsFile, "utf8")}`);
  const definition = [
    'nodes = ["l1", "l2"]',
    "[model]",
    `id = "${repo}"`,
    'source = "hub"',
    "context_length = 256",
    "[plan]",
    'strategy = "memory"',
    "[engine]",
    'kind = "reference"',
    'extra_args = ["--connect-timeout-ms", "5000", "--broken-exit-delay-ms", "200"]',
    "[transport]",
    `port_range = "${await freePortRange(["127.0.0.1"])}"`,
    "[coordinator]",
    `port = ${await freePort()}`,
    "[router]",
    "register = false",
    "",
  ].join("\n");
  await writeDefinition(world, "parity", definition);
});

afterAll(async () => {
  if (daemon !== undefined) {
    await rm(join(world.clustersDir, "parity.toml"), { force: true });
    const deadline = Date.now() + 20_000;
    while ((await readStatusFile(world, "parity")) !== undefined && Date.now() < deadline) await sleep(100);
    await daemon.stop();
  }
  await hub?.close();
  const left = world === undefined ? [] : await enginesOf(world);
  await world?.close();
  expect(left).toEqual([]);
});

/** The model files each node holds (stage nodes, and the control machine for the coordinator). */
async function filesOnNodes(): Promise<Record<string, string[]>> {
  const dirs = { l1: join(world.root, "nodes", "l1"), l2: join(world.root, "nodes", "l2"), local: join(world.stateDir, "models") };
  const files: Record<string, string[]> = {};
  for (const [node, dir] of Object.entries(dirs)) {
    files[node] = (await readdir(join(dir, "models--test-org--sharded", "snapshots", commit)).catch(() => [] as string[])).sort();
  }
  return files;
}

async function forgetStagedFiles(): Promise<void> {
  for (const dir of [join(world.root, "nodes", "l1"), join(world.root, "nodes", "l2"), join(world.stateDir, "models")]) await rm(dir, { recursive: true, force: true });
}

// Regression: a `shardctl stage` run beside another (or beside the daemon staging the same revision,
// as the upgrade guide's pre-staging does when the commit lands early) wrote the same
// blobs/<hash>.incomplete: one renamed it away under the other ("cannot rename … No such file").
test("two `shardctl stage` runs of the same model at once both succeed: the second waits for the first's files", async () => {
  // Slow enough that the two runs' transfers overlap.
  hub.pace(256 * 1024);
  try {
    const first = runShardctl(world, ["stage", "parity", "--json"]);
    await sleep(300);
    const second = runShardctl(world, ["stage", "parity", "--json"]);
    for (const r of await Promise.all([first, second])) expect(r.code, r.stdout + r.stderr).toBe(0);
  } finally {
    hub.pace(undefined);
  }
  const files = await filesOnNodes();
  expect(files.l1!.filter((f) => f.endsWith(".safetensors"))).toEqual(["model-00001-of-00002.safetensors"]);
  expect(files.l2!.filter((f) => f.endsWith(".safetensors"))).toEqual(["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]);
  // Nothing of either run's locks or partial files is left.
  const blobs = await readdir(join(world.root, "nodes", "l2", "models--test-org--sharded", "blobs"));
  expect(blobs.filter((b) => b.endsWith(".lock") || b.endsWith(".incomplete"))).toEqual([]);
  await forgetStagedFiles();
});

test("the commands and the daemon make the same plan and stage the same files", async () => {
  const planned = await runShardctl(world, ["plan", "parity", "--probe", "--json"]);
  expect(planned.code, planned.stderr).toBe(0);
  const cliPlan = (JSON.parse(planned.stdout) as { plan: { stages: Array<{ node: string; layers: number[] }> } }).plan.stages.map((s) => [s.node, s.layers]);

  const staged = await runShardctl(world, ["stage", "parity", "--json"]);
  expect(staged.code, staged.stdout + staged.stderr).toBe(0);
  const report = JSON.parse(staged.stdout) as { commit: string; staged: Array<{ node: string }>; failed: unknown[] };
  expect(report.commit).toBe(commit);
  expect(report.staged.map((s) => s.node).sort()).toEqual(["l1", "l2", "local"]);
  const cliFiles = await filesOnNodes();
  // Stage 0 (layers 0-1) needs the first shard only, stage 1 both; the coordinator no weights.
  expect(cliFiles.l1!.filter((f) => f.endsWith(".safetensors"))).toEqual(["model-00001-of-00002.safetensors"]);
  expect(cliFiles.local!.filter((f) => f.endsWith(".safetensors"))).toEqual([]);
  expect(cliFiles.local).toContain("tokenizer.json");
  // Again, for people: every node says it had the files already, in words (not the status file's enum).
  const again = await runShardctl(world, ["stage", "parity"]);
  expect(again.code, again.stdout + again.stderr).toBe(0);
  expect(again.stdout).toMatch(/^l1: present \(already present before; 0 B in 0 files, \d+ hashed\) at /m);

  await forgetStagedFiles();
  // Another shardctl process (on another control machine) stages the second shard on l2: the daemon
  // waits for its lock, and l2's staging card says so, naming it, until the lock goes. (Its event
  // comes within 500 ms of l1's: progress writes held to one per 500 ms once dropped it, and the
  // file showed l1 at 0 bytes and no l2 for as long as the wait lasted.)
  const shard2 = await readFile(join(world.root, "models", "sharded", "model-00002-of-00002.safetensors"));
  const lock = join(world.root, "nodes", "l2", "models--test-org--sharded", "blobs", `${createHash("sha256").update(shard2).digest("hex")}.lock`);
  await mkdir(lock, { recursive: true });
  await writeFile(join(lock, "holder"), "shardctl (pid 4242 on ctl-2, 0a1b2c3d4e5f)\n");
  const revision = await revisionOf(world, "parity");
  daemon = await startInProcessDaemon(world);
  const waiting = await waitForStatus(world, "parity", (s) => s.staging.some((c) => c.node === "l2" && c.reason === "WaitingForLock"), 40_000);
  expect(waiting.staging.find((c) => c.node === "l2")).toMatchObject({
    state: "staging",
    message: "waiting for shardctl (pid 4242 on ctl-2, 0a1b2c3d4e5f), which stages model-00002-of-00002.safetensors there (shardctl stage, or another daemon)",
  });
  await rm(lock, { recursive: true });
  const status = await waitForStatus(world, "parity", (s) => isReadyAt(s, revision), 40_000);
  // The card said it only while it waited.
  expect(status.staging.filter((c) => c.reason !== undefined)).toEqual([]);
  expect(status.plan!.stages.map((s) => [s.node, s.layers])).toEqual(cliPlan);
  expect(await filesOnNodes()).toEqual(cliFiles);
});
