/**
 * Stagings that take long (here four clusters downloading from a Hub stand-in paced to 8 KB/s, about a
 * minute a file) must not hold back another cluster's passes: a pass that stages gives its place in
 * the work queue back and takes a staging place on a node (four per node) for each file it transfers
 * there. A served cluster deleted meanwhile is torn down and its status file removed within seconds,
 * not once the downloads end; one whose stage died relaunches on the files it has without waiting
 * for a place; a cluster on other nodes stages and serves at once; one that needs the same file as
 * another waits for that transfer holding no place. The daemon runs in this process on four local
 * nodes (l3 and l4 added to the fixture's two).
 */
import { readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { conditionOf, removeDefinition, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const repos = ["test-org/m1", "test-org/m2", "test-org/m3", "test-org/m4"];
const fifthRepo = "test-org/m5";
let hub: HubServer | undefined;

// Registered before the world's take-down, so it runs after it (after hooks run last-registered
// first): the hub answers while the clusters are pruned.
afterAll(async () => {
  await hub?.close();
});

const dw = useDaemonWorld({
  settings: { enabled: true },
  prepare: async (world) => {
    hub = await startHubServer({ repos: [...repos, fifthRepo].map((repo) => ({ repo, commit: "1".repeat(40), dir: world.modelDir })) });
    const others = ["l3", "l4"].map(
      (name) => `[nodes.${name}]\nhost = "local"\nmodel_dir = ${JSON.stringify(join(world.root, "nodes", name))}\nmemory = "4GiB"\naccelerator = "cpu"\n`,
    );
    await writeFile(world.settingsFile, `[hub]\nendpoint = "${hub.endpoint}"\n\n${await readFile(world.settingsFile, "utf8")}\n${others.join("\n")}`);
  },
});

test("a served cluster deleted while four clusters download their models is torn down within seconds", async () => {
  const { world } = dw;
  const served = await dw.define("served", { nodes: ["l1", "l2"] });
  await dw.waitServing("served", served, 90_000);
  hub!.pace(8_000);
  try {
    for (const [i, repo] of repos.entries()) await dw.define(`slow-${i}`, { nodes: ["l1", "l2"], modelId: repo, modelSource: "hub" });
    for (const i of repos.keys()) {
      await waitForStatus(world, `slow-${i}`, (s) => conditionOf(s, "Ready")?.reason === "Staging" && s.staging.some((card) => card.bytesDone > 0), 60_000);
    }
    // A fifth model on the same nodes waits for one of their four staging places, and says so.
    await dw.define("fifth", { nodes: ["l1", "l2"], modelId: fifthRepo, modelSource: "hub" });
    // (Its first Staging status may come before it finds the places taken: the words are waited for.)
    const waitingWords = /^nothing serves this revision yet: waiting for a staging place on l[12] \(4 transfers at once on a node\)$/;
    const waiting = await waitForStatus(world, "fifth", (s) => waitingWords.test(conditionOf(s, "Ready")?.message ?? ""), 30_000);
    expect(conditionOf(waiting, "Ready")?.reason).toBe("Staging");
    const placeCard = waiting.staging.find((card) => card.reason === "WaitingForPlace");
    expect(placeCard?.message).toMatch(/^waiting for a staging place on l[12] \(4 transfers at once on a node\)$/);
    // A sixth needs the very file slow-0 transfers: it waits for that transfer, holding no place, and says so.
    await dw.define("sixth", { nodes: ["l1", "l2"], modelId: repos[0], modelSource: "hub" });
    const sharing = await waitForStatus(world, "sixth", (s) => s.staging.some((card) => card.reason === "WaitingForLock"), 30_000);
    expect(sharing.staging.find((card) => card.reason === "WaitingForLock")?.message).toMatch(
      /^waiting for another staging of this daemon, which transfers model.*\.safetensors there \(the same file: it is transferred once\)$/,
    );
    // A cluster on other nodes stages (a push) and serves without waiting for these nodes' places.
    // Regression: the places were the daemon's four, and it waited for a download to end.
    const elsewhereAt = Date.now();
    const elsewhere = await dw.define("elsewhere", { nodes: ["l3", "l4"] });
    await dw.waitServing("elsewhere", elsewhere, 45_000);
    expect(Date.now() - elsewhereAt).toBeLessThan(45_000);
    expect(await removeDefinition(world, "elsewhere", 20_000)).toBe(true);
    // A stage of the served cluster dies: its relaunch finds its files in place and takes no staging
    // place, so it serves again while the four still download. Regression: it waited for a place
    // as long as they downloaded (an hour, at a hostile Hub's pace), the router saying 404 meanwhile.
    const stage = (await new Ledger(world.stateDir).read("served"))!.processes.find((p) => p.role === "stage")!;
    const killedAt = Date.now();
    process.kill(stage.pid, "SIGKILL");
    await waitForStatus(world, "served", (s) => conditionOf(s, "Ready")?.status === "False", 20_000);
    // Within 45 s however loaded the machine: a place frees only once a download ends, a minute a file.
    await dw.waitServing("served", served, 45_000);
    expect(Date.now() - killedAt).toBeLessThan(45_000);
    for (const i of repos.keys()) expect(conditionOf(await waitForStatus(world, `slow-${i}`, () => true), "Ready")?.reason).toBe("Staging");
    const removedAt = Date.now();
    expect(await removeDefinition(world, "served", 20_000)).toBe(true);
    expect(Date.now() - removedAt).toBeLessThan(20_000);
    expect(await new Ledger(world.stateDir).read("served")).toBeUndefined();
    // The downloads go on meanwhile.
    for (const i of repos.keys()) expect(conditionOf(await waitForStatus(world, `slow-${i}`, () => true), "Ready")?.reason).toBe("Staging");
    // Removed while they download: each is called off (its transfer cut) within seconds. The four
    // together (fifth and sixth are still defined, so this is no mass prune).
    expect(await Promise.all([...repos.keys()].map((i) => removeDefinition(world, `slow-${i}`, 30_000)))).toEqual(repos.map(() => true));
    expect(await removeDefinition(world, "fifth", 30_000)).toBe(true);
    expect(await removeDefinition(world, "sixth", 30_000)).toBe(true);
  } finally {
    hub!.pace(undefined);
  }
}, 240_000);
