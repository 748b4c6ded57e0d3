/**
 * A cluster whose model comes from the Hub (the local Hub stand-in): the daemon resolves the branch
 * to its commit once, plans from that commit and stages that commit's files on every node — even
 * when the branch moves on to another model in between.
 */
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { freePort, freePortRange, isReadyAt, revisionOf, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const first = "1".repeat(40);
const second = "2".repeat(40);
let hub: HubServer;
let movedTo: string;

// Registered before the world's take-down, so it runs after it (after hooks run last-registered
// first): the hub answers while the cluster is pruned.
afterAll(async () => {
  await hub?.close();
});

const dw = useDaemonWorld({
  settings: { enabled: true },
  prepare: async (world) => {
    movedTo = join(world.root, "models", "six-layers");
    await makeTestModel(movedTo, { layers: 6, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 12 });
    hub = await startHubServer({ repos: [{ repo: "test-org/tiny", commit: first, dir: world.modelDir }] });
    await writeFile(world.settingsFile, `[hub]\nendpoint = "${hub.endpoint}"\n\n${await readFile(world.settingsFile, "utf8")}`);
  },
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
  const { world } = dw;
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
  // The status says which weights answer.
  expect(status.modelCommit).toBe(first);

  // A restarted daemon plans the revision again, resolving the branch anew: a relaunch after a death
  // serves the moved branch, and says so (not that the nodes lost files), from the commit the
  // launch recorded in the ledger.
  await dw.stopDaemon();
  await dw.startDaemon();
  const adopted = await waitForStatus(world, "hubbed", (s) => isReadyAt(s, revision) && s.history.length > 0, 60_000);
  expect(adopted.modelCommit).toBe(first);
  process.kill(adopted.stages[0]!.pid!, "SIGKILL");
  const moved = await waitForStatus(world, "hubbed", (s) => isReadyAt(s, revision) && s.modelCommit === second, 90_000);
  expect(moved.conditions.find((c) => c.type === "Staged")?.message).toContain(
    `the model at test-org/tiny changed since this revision was staged (its files now hash to ${second.slice(0, 12)}, were ${first.slice(0, 12)})`,
  );
}, 180_000);
