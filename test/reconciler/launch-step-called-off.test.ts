/**
 * A launch called off in its launch step, while it waits on an engine that hangs as it starts (it
 * never listens, never exits: a model that takes its time to load, or an engine stuck doing so).
 * The stage listen deadline is two minutes, far beyond every wait here, so nothing below can come
 * from the launch giving up by itself:
 * - the definition removed: the launch is torn down and the cluster pruned within seconds;
 * - the definition edited: the hung attempt is torn down and the new revision launched at once;
 * - the settings edited (a used node's entry, which the revision includes): the same;
 * - the daemon stopped: it stops within seconds, leaving nothing running and the attempt uncounted,
 *   and the next daemon launches.
 * Two real sshd nodes, the in-process daemon of useDaemonWorld, the reference engine behind a
 * stand-in script whose stage-0 hangs while a flag file exists; none may be left hanging at the end.
 * Needs `npm run build`.
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import {
  conditionOf,
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  processesOf,
  readStatusFile,
  removeDefinition,
  revisionOf,
  waitForStatus,
  writeDefinition,
  writeFlaggedEngine,
  writeSettings,
  type DaemonWorld,
} from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

/** The stage listen deadline: longer than any test here waits. */
const stageListenMs = 120_000;
let binary: string;
/** While this file exists, stage-0 hangs: it neither listens nor exits. */
let hangFlag: string;

// Registered before the world's take-down, so it runs after it: a stand-in stage still hanging
// then (a test that failed mid-launch) is killed and named.
afterAll(async () => {
  expect(await killHungEngines(), "stand-in stages left hanging after the tests").toEqual([]);
});

const dw = useDaemonWorld({
  sshNodes: 2,
  settings: { restartBudget: 3 },
  launch: { stageListenMs },
  prepare: async (world) => {
    hangFlag = join(world.root, "hang-stage-0");
    // The stand-in shell itself waits (rather than exec'ing sleep), so its command line still names it.
    binary = await writeFlaggedEngine(world, "hanging-engine.sh", hangFlag, "while :; do sleep 1; done");
  },
});
let world: DaemonWorld;

beforeAll(() => {
  world = dw.world;
});

/** Stand-in stages still hanging (none once every launch was torn down), killed: their `ps` lines. */
async function killHungEngines(): Promise<string[]> {
  if (world === undefined) return [];
  const hung = (await processesOf(world)).filter((line) => line.includes("hanging-engine.sh"));
  for (const line of hung) {
    try {
      process.kill(Number(line.split(/\s+/)[0]), "SIGKILL");
    } catch {
      // Already gone.
    }
  }
  return hung;
}

/** A definition of two stages on n1 and n2 with the stand-in engine; `contextLength` changes its revision. */
async function definition(contextLength?: number): Promise<string> {
  return definitionText(world, {
    nodes: ["n1", "n2"],
    binary,
    port: await freePort(),
    portRange: await freePortRange([...world.hosts.values()]),
    ...(contextLength === undefined ? {} : { contextLength }),
  });
}

/** Writes `name`'s definition with stage-0 hanging and waits until the launch waits on it: the hung pid. */
async function launchHung(name: string, text: string): Promise<number> {
  await writeFile(hangFlag, "");
  await writeDefinition(world, name, text);
  const waiting = await waitForStatus(world, name, (s) => s.timeline.some((e) => e.step === "stage-0-started"), 60_000);
  const started = waiting.timeline.find((e) => e.step === "stage-0-started")!;
  const pid = Number(/^pid (\d+) /.exec(started.detail ?? "")?.[1]);
  expect(pid, started.detail).toBeGreaterThan(0);
  // Hung, not gone: the launch is waiting on a live process.
  expect(await isGone(pid)).toBe(false);
  return pid;
}

/** Whether `pid` has ended: no such process, or a zombie its parent (here pid 1, which reaps when it gets to it) has not reaped yet. */
async function isGone(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, "utf8").catch(() => undefined);
  return stat === undefined || stat.slice(stat.lastIndexOf(")") + 2).startsWith("Z");
}

function stepsOf(status: ClusterStatus): string[] {
  return status.timeline.map((e) => e.step);
}

it("the definition removed while stage-0 hangs at launch: torn down and pruned within seconds", async () => {
  const pid = await launchHung("removed", await definition());
  const removedAt = Date.now();
  expect(await removeDefinition(world, "removed", 30_000)).toBe(true);
  expect(Date.now() - removedAt).toBeLessThan(30_000);
  expect(await isGone(pid)).toBe(true);
  expect(await new Ledger(world.stateDir).read("removed")).toBeUndefined();
  await rm(hangFlag);
}, 120_000);

it("the definition edited while stage-0 hangs at launch: the hung attempt is torn down and the new revision launched at once", async () => {
  const pid = await launchHung("edited", await definition());
  const abandoned = await revisionOf(world, "edited");
  // The next launch does not hang: only the edit can end the one under way within the test.
  await rm(hangFlag);
  await writeDefinition(world, "edited", await definition(128));
  const wanted = await revisionOf(world, "edited");
  expect(wanted).not.toBe(abandoned);
  const ready = await waitForStatus(world, "edited", (s) => isReadyAt(s, wanted) && s.stages.every((c) => c.alive), 60_000);
  expect(ready.health).toBe("Healthy");
  expect(
    ready.history.some((h) => h.action === "launch" && h.reason === "Superseded"),
    JSON.stringify(ready.history),
  ).toBe(true);
  expect(await isGone(pid)).toBe(true);
  // The new revision's budget: one launch, the one that made it.
  expect(ready.restarts).toMatchObject({ revision: wanted, count: 1 });
  expect(await removeDefinition(world, "edited")).toBe(true);
}, 150_000);

it("the settings changed while stage-0 hangs at launch (a used node's registry entry, part of the revision): the hung attempt is torn down and the revision they make launched at once", async () => {
  const pid = await launchHung("resettled", await definition());
  const abandoned = await revisionOf(world, "resettled");
  await rm(hangFlag);
  await writeSettings(world, { restartBudget: 3, nodeMemory: "3GiB" });
  const wanted = await revisionOf(world, "resettled");
  expect(wanted).not.toBe(abandoned);
  try {
    const ready = await waitForStatus(world, "resettled", (s) => isReadyAt(s, wanted) && s.stages.every((c) => c.alive), 60_000);
    const superseded = ready.history.find((h) => h.action === "launch" && h.reason === "Superseded");
    expect(superseded, JSON.stringify(ready.history)).toBeDefined();
    expect(await isGone(pid)).toBe(true);
    expect(await removeDefinition(world, "resettled")).toBe(true);
  } finally {
    await writeSettings(world, { restartBudget: 3 });
  }
}, 150_000);

it("the daemon stopped while stage-0 hangs at launch: it stops within seconds, nothing runs, the attempt is not counted; the next daemon launches", async () => {
  const pid = await launchHung("halted", await definition());
  const revision = await revisionOf(world, "halted");
  const stoppingAt = Date.now();
  await dw.stopDaemon();
  expect(Date.now() - stoppingAt).toBeLessThan(20_000);
  expect(await isGone(pid)).toBe(true);
  expect(await new Ledger(world.stateDir).read("halted")).toBeUndefined();
  const status = (await readStatusFile(world, "halted"))!;
  expect(conditionOf(status, "Ready")).toMatchObject({ status: "False", reason: "DaemonStopping" });
  expect(conditionOf(status, "Ready")?.message).toMatch(
    /^stopped launching revision \w{12} at the launch step: the daemon is stopping; the daemon's next start takes it up again$/,
  );
  expect(stepsOf(status)).toContain("launch-called-off");
  expect(stepsOf(status).at(-1)).toBe("torn-down");
  expect(status.restarts?.count ?? 0).toBe(0);

  await rm(hangFlag);
  await dw.startDaemon();
  const ready = await waitForStatus(world, "halted", (s) => isReadyAt(s, revision) && s.stages.every((c) => c.alive), 60_000);
  expect(ready.restarts).toMatchObject({ revision, count: 1 });
  expect(await removeDefinition(world, "halted")).toBe(true);
}, 150_000);
