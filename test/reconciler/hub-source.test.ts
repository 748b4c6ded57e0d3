/**
 * A cluster whose model comes from the Hub (the local Hub stand-in): the daemon resolves the branch
 * to its commit once, plans from that commit and stages that commit's files on every node — even
 * when the branch moves on to another model in between.
 */
import { readdir, readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import type { Daemon } from "../../src/reconciler/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import {
  enginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  readStatusFile,
  revisionOf,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "./daemon-fixture.js";

const first = "1".repeat(40);
const second = "2".repeat(40);
let world: DaemonWorld;
let hub: HubServer;
let daemon: Daemon;
let movedTo: string;

beforeAll(async () => {
  world = await startWorld();
  movedTo = join(world.root, "models", "six-layers");
  await makeTestModel(movedTo, { layers: 6, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 12 });
  hub = await startHubServer({ repos: [{ repo: "test-org/tiny", commit: first, dir: world.modelDir }] });
  await writeSettings(world, { enabled: true });
  await writeFile(world.settingsFile, `[hub]\nendpoint = "${hub.endpoint}"\n\n${await readFile(world.settingsFile, "utf8")}`);
  daemon = await startInProcessDaemon(world);
});

afterAll(async () => {
  // The daemon leaves clusters running when it stops (they are desired state): prune first.
  if (daemon !== undefined) {
    await rm(join(world.clustersDir, "hubbed.toml"), { force: true });
    const deadline = Date.now() + 20_000;
    while ((await readStatusFile(world, "hubbed")) !== undefined && Date.now() < deadline) await sleep(100);
  }
  await daemon?.stop();
  await hub?.close();
  const left = world === undefined ? [] : await enginesOf(world);
  await world?.close();
  expect(left).toEqual([]);
});

test("plans and stages the commit the branch pointed at, on every node, though the branch moves on", async () => {
  const definition = [
    'nodes = ["l1", "l2"]',
    "[model]",
    'id = "test-org/tiny"',
    'revision = "main"',
    'source = "hub"',
    "context_length = 256",
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
  await writeDefinition(world, "hubbed", definition);
  const revision = await revisionOf(world, "hubbed");
  // Once planned, "main" moves to a six-layer model; the launch must still be the four-layer commit.
  await waitForStatus(world, "hubbed", (s) => s.conditions.some((c) => c.type === "Planned" && c.status === "True"), 30_000);
  hub.setRepo({ repo: "test-org/tiny", commit: second, dir: movedTo });
  const status = await waitForStatus(world, "hubbed", (s) => isReadyAt(s, revision), 60_000);
  expect(status.plan!.stages.map((s) => s.layers)).toEqual([
    [0, 2],
    [2, 4],
  ]);
  for (const node of ["l1", "l2"]) {
    expect(await readdir(join(world.root, "nodes", node, "models--test-org--tiny", "snapshots"))).toEqual([first]);
  }
});
