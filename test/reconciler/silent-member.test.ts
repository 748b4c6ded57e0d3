/**
 * One member of a shard-engine pipeline stops answering (SIGSTOP: its sockets stay open, nothing
 * answers, its process lives on): its peers notice first and exit, each naming it (status 69, a
 * "peer silent" log line). The status names the member that went silent — in Ready, lastError and
 * the restart evidence — within moments of the first death record, while the teardown runs, not the
 * peer that exited because of it.
 */
import { expect, test } from "vitest";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { conditionOf, enginePidOf, isReadyAt, readStatusFile, sleep, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

// A budget left after the death: the relaunch (seconds of engine start) follows the death record,
// so the status naming the silent member stands long enough to be read. With none left the stall
// could overwrite it within milliseconds, between two reads of the file.
const dw = useDaemonWorld({ sshNodes: 2, settings: { restartBudget: 2 } });
const name = "silent";

test("a stopped stage-0: the status names it, not stage-1 that exited because of it, from the death record on", async () => {
  const { world } = dw;
  // The coordinator waits 2 s with a broken pipeline before it exits (the engine's default): stage-1 exits first.
  const extraArgs = ["--connect-timeout-ms", "5000", "--broken-exit-delay-ms", "2000"];
  const revision = await dw.define(name, { nodes: ["n1", "n2"], extraArgs });
  const ready = await dw.waitServing(name, revision);
  const engine = await enginePidOf(ready.stages[0]!.pid!);
  const stoppedAt = Date.now();
  process.kill(engine, "SIGSTOP");
  // Its peers find it silent at about the same moment: stage-1 exits at once, the coordinator
  // answers /health 503 (and exits 2 s later); the monitor may judge either first. Both name stage-0.
  const silentLine =
    /^stage-0 on n1 stopped answering \((stage-1|coordinator) heard nothing from it for \d+ ms\); (stage-1 on n2: pid \d+ (exited because its upstream went silent \(with status 69\)|is no longer running because its upstream went silent \(exited with status 69\))|coordinator on local: \S+ was \w+ for \d+ probes in a row)/;
  // The status file as it changes, read every 20 ms, until the relaunch begins.
  const seen: Array<{ at: number; status: ClusterStatus }> = [];
  try {
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      const status = await readStatusFile(world, name).catch(() => undefined);
      if (status !== undefined) seen.push({ at: Date.now(), status });
      if (status !== undefined && conditionOf(status, "Reconciling")?.reason === "Launching") break;
      await sleep(20);
    }
  } finally {
    try {
      process.kill(engine, "SIGCONT");
    } catch {
      // Already stopped by the teardown.
    }
  }
  const down = seen.find((s) => conditionOf(s.status, "Ready")?.status === "False");
  const named = seen.find((s) => silentLine.test(conditionOf(s.status, "Ready")?.message ?? ""));
  expect(down, "Ready=False").toBeDefined();
  expect(named, `a status naming stage-0; Ready said: ${[...new Set(seen.map((s) => conditionOf(s.status, "Ready")?.message))].join(" | ")}`).toBeDefined();
  // The peers declare it dead after 2.5 s of silence; the record names it within moments of that
  // (each member's log is read over SSH, at most 2 s each, all at once).
  expect(named!.at - stoppedAt).toBeLessThan(6_000);
  expect(named!.at - down!.at).toBeLessThan(2_500);
  expect(conditionOf(named!.status, "Ready")?.reason).toBe(conditionOf(down!.status, "Ready")?.reason);
  expect(conditionOf(named!.status, "Ready")?.reason).toMatch(/^(StageDied|CoordinatorUnhealthy|CoordinatorDied)$/);
  expect(named!.status.lastError?.message).toMatch(silentLine);
  // The launch timeline's record of the death says the same.
  const unhealthy = named!.status.timeline.filter((e) => e.step === "cluster-unhealthy").at(-1);
  expect(unhealthy?.detail?.replace(/^\w+: /, "")).toMatch(silentLine);
  // Reconciling names it too while the teardown runs; a relaunch that began meanwhile says its own.
  const reconciling = conditionOf(named!.status, "Reconciling")!;
  if (reconciling.reason === "TearingDown") expect(reconciling.message).toContain("tearing the cluster down after stage-0 on n1 stopped answering");
  expect(named!.status.restarts!.evidence.at(-1)!.message).toMatch(silentLine);
  // No status in between blamed anyone else but the one that was seen to go first.
  for (const { status } of seen.filter((s) => s.at > named!.at && conditionOf(s.status, "Ready")?.reason === conditionOf(named!.status, "Ready")?.reason)) {
    expect(conditionOf(status, "Ready")?.message).toMatch(silentLine);
  }
  // The relaunch keeps the death's evidence, named and with the log line that named it.
  const relaunched = await waitForStatus(world, name, (s) => isReadyAt(s, revision) && (s.restarts?.count ?? 0) === 2 && s.stages.every((c) => c.alive));
  const evidence = relaunched.restarts!.evidence.at(-1)!;
  expect(evidence.message).toMatch(silentLine);
  expect(evidence.logTail.join("\n")).toMatch(/"peer":"stage-0","link":"(upstream|stage)",.*"msg":"peer silent"/);
});
