/**
 * A launch called off while it stages (the Hub stand-in pacing the weights so a staging would take
 * minutes): a revert makes the daemon stop staging the abandoned revision (the download in flight
 * is cut, its partial file kept), launch nothing of it, and serve the reverted-to revision within
 * seconds; an invalid edit does not call it off; a removed definition and a stopping daemon do.
 */
import { readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { conditionOf, freePort, freePortRange, isReadyAt, readStatusFile, removeDefinition, revisionOf, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

let hub: HubServer;

// Registered before the world's take-down, so it runs after it: the hub answers while the cluster is pruned.
afterAll(async () => {
  await hub?.close();
});

const dw = useDaemonWorld({
  settings: { enabled: true },
  prepare: async (world) => {
    const big = join(world.root, "models", "big");
    // About 5 MB of weights: minutes at the pace set below.
    await makeTestModel(big, { layers: 4, hidden: 256, heads: 4, kvHeads: 2, vocab: 320, seed: 21 });
    hub = await startHubServer({
      repos: [
        { repo: "test-org/tiny", commit: "1".repeat(40), dir: world.modelDir },
        { repo: "test-org/big", commit: "2".repeat(40), dir: big },
      ],
    });
    await writeFile(world.settingsFile, `[hub]\nendpoint = "${hub.endpoint}"\n\n${await readFile(world.settingsFile, "utf8")}`);
  },
});

async function definitionOf(model: string, transport: string, port: number): Promise<string> {
  return [
    'nodes = ["l1", "l2"]',
    "[model]",
    `id = "${model}"`,
    'revision = "main"',
    'source = "hub"',
    "context_length = 256",
    "[engine]",
    'kind = "reference"',
    "[transport]",
    `port_range = "${transport}"`,
    "[coordinator]",
    `port = ${port}`,
    "[router]",
    "register = false",
    "",
  ].join("\n");
}

test("a revert during staging cuts the download and serves the reverted-to revision within seconds", async () => {
  const { world } = dw;
  const transport = await freePortRange(["127.0.0.1"]);
  const port = await freePort();
  const original = await definitionOf("test-org/tiny", transport, port);
  await writeDefinition(world, "reverted", original);
  const first = await revisionOf(world, "reverted");
  await waitForStatus(world, "reverted", (s) => isReadyAt(s, first), 60_000);

  // The new revision's weights come at 64 KiB/s: its staging would take over a minute.
  hub.pace(64 * 1024);
  await writeDefinition(world, "reverted", await definitionOf("test-org/big", transport, port));
  const abandoned = await revisionOf(world, "reverted");
  await waitForStatus(world, "reverted", (s) => (s.staging ?? []).some((card) => card.state === "staging" && card.bytesDone > 100_000), 60_000);
  const bigPath = (): number =>
    Object.entries(hub.stats().bytesByPath)
      .filter(([path]) => path.includes("test-org/big"))
      .reduce((sum, [, bytes]) => sum + bytes, 0);

  await writeDefinition(world, "reverted", original);
  const reverted = Date.now();
  const status = await waitForStatus(world, "reverted", (s) => isReadyAt(s, first), 20_000);
  const tookMs = Date.now() - reverted;

  // The abandoned pass said why it stopped, and nothing of its revision was launched.
  expect(
    status.history.some((h) => h.action === "stage" && h.reason === "Superseded"),
    JSON.stringify(status.history),
  ).toBe(true);
  expect(status.observedRevision).toBe(first);
  expect(abandoned).not.toBe(first);
  expect(tookMs).toBeLessThan(20_000);
  // The download was cut, not left running: no more bytes of the abandoned model are sent.
  const servedThen = bigPath();
  await new Promise((resolve) => setTimeout(resolve, 1_500));
  expect(bigPath()).toBe(servedThen);
  // What arrived is kept for a later staging of that revision to resume.
  const blobs = await readdir(join(world.root, "nodes", "l1", "models--test-org--big", "blobs")).catch(() => [] as string[]);
  const partials = await readdir(join(world.root, "nodes", "l2", "models--test-org--big", "blobs")).catch(() => [] as string[]);
  expect(
    [...blobs, ...partials].some((name) => name.endsWith(".incomplete")),
    JSON.stringify({ blobs, partials }),
  ).toBe(true);
}, 150_000);

test("an invalid edit during staging does not stop it; removing the definition does, and the cluster is pruned", async () => {
  const { world } = dw;
  const transport = await freePortRange(["127.0.0.1"]);
  const port = await freePort();
  hub.pace(64 * 1024);
  const wanted = await definitionOf("test-org/big", transport, port);
  await writeDefinition(world, "edited", wanted);
  const staged = (s: { staging?: Array<{ state: string; bytesDone: number }> }): number => (s.staging ?? []).reduce((sum, card) => sum + card.bytesDone, 0);
  const before = staged(await waitForStatus(world, "edited", (s) => (s.staging ?? []).some((card) => card.state === "staging" && card.bytesDone > 50_000), 60_000));

  await writeFile(join(world.clustersDir, "edited.toml"), `${wanted}\n[engine\n`);
  // About 3 s (several looks at the definition) later, the staging still goes on and nothing was superseded.
  const later = await waitForStatus(world, "edited", (s) => staged(s) > before + 400_000, 30_000);
  expect(
    later.history.some((h) => h.reason === "Superseded"),
    JSON.stringify(later.history),
  ).toBe(false);

  // Removed: the staging (a minute from its end at this pace) is cut and the cluster pruned within seconds.
  const removed = Date.now();
  expect(await removeDefinition(world, "edited", 15_000)).toBe(true);
  expect(Date.now() - removed).toBeLessThan(15_000);
  hub.pace(undefined);
}, 120_000);

test("a daemon that stops during a staging does not wait for it: the download is cut, and the next daemon resumes and launches", async () => {
  const { world } = dw;
  const transport = await freePortRange(["127.0.0.1"]);
  const port = await freePort();
  hub.pace(64 * 1024);
  await writeDefinition(world, "paused", await definitionOf("test-org/big", transport, port));
  const revision = await revisionOf(world, "paused");
  await waitForStatus(world, "paused", (s) => (s.staging ?? []).some((card) => card.state === "staging" && card.bytesDone > 50_000), 60_000);

  const stopping = Date.now();
  await dw.stopDaemon();
  expect(Date.now() - stopping).toBeLessThan(10_000);
  // The stopped daemon gave the nodes' file locks back before it closed its connections: another
  // daemon or `shardctl stage` need not wait out their stale bound (two minutes).
  const locks = ((await readdir(join(world.root, "nodes"), { recursive: true })) as string[]).filter((f) => /\.lock$/.test(f));
  expect(locks).toEqual([]);
  const ready = conditionOf((await readStatusFile(world, "paused"))!, "Ready");
  expect(ready?.reason, JSON.stringify(ready)).toBe("DaemonStopping");
  expect(ready?.message).toMatch(/the daemon is stopping; the daemon's next start takes it up again/);

  hub.pace(undefined);
  await dw.startDaemon();
  await waitForStatus(world, "paused", (s) => isReadyAt(s, revision), 60_000);
}, 120_000);
