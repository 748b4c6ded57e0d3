/**
 * A daemon that is stopped (SIGSTOP: a frozen VM, a debugger) or hung keeps its pid and its lock,
 * and the status files it wrote keep saying what they said. Its heartbeat on the lock stops, so
 * `status` warns, `wait` does not accept a condition it wrote, and `reconcile` says why nobody
 * takes the request — until it runs again.
 */
import { afterAll, beforeAll, expect, test } from "vitest";
import {
  conditionOf,
  definitionText,
  runShardctl,
  sleep,
  spawnDaemon,
  startWorld,
  waitForStatus,
  waitWatching,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
  type SpawnedDaemon,
} from "../reconciler/daemon-fixture.js";

/** The settings' heartbeat here, s: silent after 4 missed beats, 2 s. */
const heartbeatSeconds = 0.5;

let world: DaemonWorld;
let daemon: SpawnedDaemon;
beforeAll(async () => {
  world = await startWorld();
  // Distributed serving off: the cluster is planned (Planned=True), nothing is launched.
  await writeSettings(world, { enabled: false, heartbeatSeconds });
  await writeDefinition(world, "quiet", definitionText(world, { nodes: ["l1", "l2"] }));
  daemon = await spawnDaemon(world);
  await waitWatching(daemon);
  await waitForStatus(world, "quiet", (s) => conditionOf(s, "Planned")?.status === "True");
});
afterAll(async () => {
  if (daemon !== undefined && daemon.child.exitCode === null) {
    daemon.child.kill("SIGCONT");
    daemon.child.kill("SIGTERM");
    await daemon.exited;
  }
  await world?.close();
});

test("a stopped daemon is named as silent by status, wait and reconcile, and trusted again once it runs", async () => {
  const pid = daemon.child.pid!;
  const answering = await runShardctl(world, ["wait", "quiet", "--for", "condition=Planned", "--timeout", "5s"]);
  expect(answering.code).toBe(0);
  expect(answering.stderr).toBe("");
  expect((await runShardctl(world, ["status"])).stderr).toBe("");

  daemon.child.kill("SIGSTOP");
  try {
    await sleep(4 * heartbeatSeconds * 1000 + 700);
    const status = await runShardctl(world, ["status"]);
    expect(status.code).toBe(0);
    expect(status.stderr).toMatch(
      new RegExp(`^warning: the shardctl daemon watching \\S+ \\(pid ${pid}, not heard from for \\d+ s: stopped or hung\\?\\) keeps no status current`),
    );
    // The file still says Planned=True; nothing that runs keeps it so.
    expect(status.stdout).toMatch(/^quiet\s/m);
    const waited = await runShardctl(world, ["wait", "quiet", "--for", "condition=Planned", "--timeout", "2s"]);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain(`timed out after 2s waiting for condition Planned`);
    expect(waited.stderr).toContain(`the status says Planned=True, but the daemon that wrote it is silent (pid ${pid}, not heard from for`);
    const asked = await runShardctl(world, ["reconcile", "quiet"]);
    expect(asked.code).toBe(1);
    expect(asked.stderr).toContain(`is silent (pid ${pid}`);
  } finally {
    daemon.child.kill("SIGCONT");
  }
  // Running again: its next beat makes it trusted.
  const resumed = await runShardctl(world, ["wait", "quiet", "--for", "condition=Planned", "--timeout", "10s"]);
  expect(resumed.code).toBe(0);
  expect(resumed.stderr).toBe("");
  expect((await runShardctl(world, ["status"])).stderr).toBe("");
});
