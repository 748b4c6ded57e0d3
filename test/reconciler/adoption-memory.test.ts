/**
 * What a restarted daemon remembers of a cluster it adopts: the previous daemon's status file is
 * its memory. Regression: the stage cards' `since` restarted at the adoption (every stage looked
 * seconds old) and the restart count of the revision dropped to 0. Real daemon processes, stopped
 * with SIGTERM (clusters keep running) and started again; run `npm run build` first.
 */
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { definitionText, isReadyAt, revisionOf, runShardctl, sleep, waitForStatus, writeDefinition, type SpawnedDaemon } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// Two local nodes of this machine, distributed serving on: a real cluster. The tests spawn the daemons.
const dw = useDaemonWorld({ settings: { enabled: true }, daemon: "none" });
const start = (): Promise<SpawnedDaemon> => dw.spawnDaemon();

/** SIGTERM: the daemon exits 0 and leaves its clusters running. */
async function stop(d: SpawnedDaemon): Promise<void> {
  d.child.kill("SIGTERM");
  expect(await d.exited).toBe(0);
}

test("after a daemon restart the adopted cluster keeps its stage cards' since and its launch count", async () => {
  const { world } = dw;
  const text = definitionText(world, { nodes: ["l1", "l2"], ...(await dw.freeAddresses()) });
  await writeDefinition(world, "keep", text);
  const revision = await revisionOf(world, "keep");
  let daemon = await start();
  try {
    const before = await waitForStatus(
      world,
      "keep",
      (s) => isReadyAt(s, revision) && s.stages.length === 2 && s.stages.every((c) => c.alive && c.transport === "listening"),
    );
    expect(before.restarts?.count).toBe(1);
    const startedAt = (await new Ledger(world.stateDir).read("keep"))!.startedAt;

    // Long enough that a card restarted by the next daemon would show another time.
    await sleep(1_500);
    await stop(daemon);
    daemon = await start();
    const adopted = await waitForStatus(world, "keep", (s) => isReadyAt(s, revision) && s.history.length > before.history.length);
    // The same launch, adopted (no restart)…
    expect(adopted.history.at(-1)?.action).toBe("none");
    expect((await new Ledger(world.stateDir).read("keep"))!.startedAt).toBe(startedAt);
    expect(adopted.stages.map((c) => c.pid)).toEqual(before.stages.map((c) => c.pid));
    // …whose cards keep the time their processes have been alive and listening, and whose revision
    // keeps its launch count.
    expect(adopted.stages.map((c) => c.since)).toEqual(before.stages.map((c) => c.since));
    expect(adopted.restarts?.count).toBe(1);
    const detail = await runShardctl(world, ["status", "keep"]);
    expect(detail.code).toBe(0);
    const cards = detail.stdout.split("\n").filter((l) => /^\d+\s+l\d/.test(l));
    expect(cards).toHaveLength(2);
    // Ages of at least a second: counted from the first daemon's observation, not the adoption.
    for (const line of cards) expect(line).toMatch(/\s(?:[1-9]\d*s|\d+m)$/);
    expect(detail.stdout).toMatch(/^launches 1 of 3 at this revision$/m);

    // A router-only edit while no daemon runs: the next daemon applies it in place (no restart); the
    // launch it adopts counts at the new revision, and the cards keep their time again.
    await stop(daemon);
    await writeDefinition(world, "keep", text.replace("register = false", "register = false\nweight = 7"));
    const edited = await revisionOf(world, "keep");
    expect(edited).not.toBe(revision);
    daemon = await start();
    const inPlace = await waitForStatus(world, "keep", (s) => isReadyAt(s, edited));
    expect((await new Ledger(world.stateDir).read("keep"))!.startedAt).toBe(startedAt);
    expect(inPlace.restarts).toMatchObject({ revision: edited, count: 1 });
    expect(inPlace.stages.map((c) => c.since)).toEqual(before.stages.map((c) => c.since));
  } finally {
    // Stop the cluster, so nothing is left running.
    await writeDefinition(world, "keep", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
    await waitForStatus(world, "keep", (s) => s.health === "Stopped");
    await stop(daemon);
  }
});
