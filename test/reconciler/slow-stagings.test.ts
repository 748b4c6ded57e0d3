/**
 * Stagings that take long (here four clusters downloading from a Hub stand-in paced to 8 KB/s, about a
 * minute a file) must not hold back another cluster's passes: a pass that stages gives its place in
 * the work queue back and takes one of the stagings' own four. A served cluster deleted meanwhile is
 * torn down and its status file removed within seconds, not once the downloads end; one whose stage
 * died relaunches on the files it has without waiting for a place. The daemon runs in this process
 * on two local nodes.
 */
import { readFile, writeFile } from "node:fs/promises";
import { afterAll, expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { conditionOf, removeDefinition, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const repos = ["test-org/m1", "test-org/m2", "test-org/m3", "test-org/m4"];
let hub: HubServer | undefined;

// Registered before the world's take-down, so it runs after it (after hooks run last-registered
// first): the hub answers while the clusters are pruned.
afterAll(async () => {
  await hub?.close();
});

const dw = useDaemonWorld({
  settings: { enabled: true },
  prepare: async (world) => {
    hub = await startHubServer({ repos: repos.map((repo) => ({ repo, commit: "1".repeat(40), dir: world.modelDir })) });
    await writeFile(world.settingsFile, `[hub]\nendpoint = "${hub.endpoint}"\n\n${await readFile(world.settingsFile, "utf8")}`);
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
    // A fifth waits for one of the four staging places, and says so.
    await dw.define("fifth", { nodes: ["l1", "l2"], modelId: repos[0], modelSource: "hub" });
    // (Its first Staging status may come before it finds the four places taken: the words are waited for.)
    const waitingWords = "nothing serves this revision yet: waiting for a staging place (4 stagings transfer at once)";
    const waiting = await waitForStatus(world, "fifth", (s) => conditionOf(s, "Ready")?.message === waitingWords, 30_000);
    expect(conditionOf(waiting, "Ready")?.reason).toBe("Staging");
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
    // Removed while they download: each is called off (its transfer cut) within seconds.
    for (const i of repos.keys()) expect(await removeDefinition(world, `slow-${i}`, 30_000)).toBe(true);
    expect(await removeDefinition(world, "fifth", 30_000)).toBe(true);
  } finally {
    hub!.pace(undefined);
  }
}, 240_000);
