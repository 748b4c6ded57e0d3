/**
 * A death that a reconcile pass finds before the health monitor does (the two race when a pass is
 * under way at the kill) is recorded all the same: the evidence names the process that was killed,
 * how it ended and its log tail (then the peers that exited because of it), and the stall on a
 * spent budget says why. The monitor here neither watches exits nor polls within the test, so only
 * the daemon's resync pass can find the death.
 */
import { afterAll, afterEach, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  conditionOf,
  definitionText,
  enginePidOf,
  enginesOf,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  revisionOf,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "./daemon-fixture.js";

let world: DaemonWorld;
let daemon: Daemon;

beforeAll(async () => {
  world = await startWorld({ sshNodes: 2 });
  await writeSettings(world, { restartBudget: 1 });
  // Resync every second; the monitor would first poll in ten minutes and watches no exits.
  daemon = await startInProcessDaemon(world, 1_000, { pollIntervalMs: 600_000, exitWatch: false });
});

afterAll(async () => {
  if (world !== undefined) await removeDefinition(world, "found");
  await daemon?.stop();
  const left = world === undefined ? [] : await enginesOf(world);
  await world?.close();
  expect(left).toEqual([]);
});

afterEach(() => {
  expect(world.audit.problems).toEqual([]);
});

test("a stage killed while only passes look: evidence names it, with its signal and log tail; the stall says why", async () => {
  const hosts = ["127.0.0.1", ...world.hosts.values()];
  await writeDefinition(world, "found", definitionText(world, { nodes: ["n1", "n2"], port: await freePort(), portRange: await freePortRange(hosts) }));
  const revision = await revisionOf(world, "found");
  const ready = await waitForStatus(world, "found", (s) => isReadyAt(s, revision) && s.stages.length === 2 && s.stages.every((c) => c.alive));
  expect(ready.restarts).toMatchObject({ count: 1, budget: 1, evidence: [] });

  process.kill(await enginePidOf(ready.stages[1]!.pid!), "SIGKILL");
  const stalled = await waitForStatus(world, "found", (s) => s.health === "Stalled");
  expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "RestartBudgetExhausted" });
  expect(stalled.restarts!.evidence).toHaveLength(1);
  const evidence = stalled.restarts!.evidence[0]!;
  expect(evidence.reason).toBe("StageDied");
  // Its peers may be gone too by the time the pass looks: the killed one is blamed, and each peer
  // whose log says it lost its link to it is named after it.
  expect(evidence.message).toMatch(
    /^stage-1 on n2: pid \d+ is no longer running \(killed by SIGKILL \(status 137\)\)(; (stage-0 on n1|coordinator on local): pid \d+ is no longer running because its link to stage-1 broke \([^)]+\))*$/,
  );
  expect(evidence.logTail.length).toBeGreaterThan(0);
  expect(conditionOf(stalled, "Stalled")?.message).toContain(`the last failure: StageDied: stage-1 on n2`);
  expect(await enginesOf(world)).toEqual([]);
});
