// The event stream carries what happens as it happens: staging progress while the model is being
// staged, and a stage's death (Unhealthy, Ready withdrawn) before the relaunch, in the stream and in
// the status file alike. A real daemon (in this process) launches a two-stage cluster on two local
// nodes of this machine with the reference engine.
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, expect, test } from "vitest";
import { startDaemon } from "../../src/reconciler/index.js";
import type { ClusterStatus, Daemon } from "../../src/reconciler/index.js";
import {
  definitionText,
  enginePidOf,
  enginesOf,
  freePort,
  freePortRange,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { assertSchema, enableDashboard, SseReader } from "./support.js";

let world: DaemonWorld;
let daemon: Daemon;
let stream: SseReader;

beforeAll(async () => {
  world = await startWorld();
  await writeSettings(world, { enabled: true, restartBudget: 5 });
  await enableDashboard(world);
  daemon = await startInProcessDaemon(world);
  stream = new SseReader(new URL("api/events", daemon.uiUrl).href);
  await stream.waitFor((e) => e.event === "hello");
});

afterAll(async () => {
  stream?.close();
  await daemon?.stop();
  if (world !== undefined) {
    const last = await startInProcessDaemon(world).catch(() => undefined);
    if (last !== undefined) {
      await writeDefinition(world, "live", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }).replace('source = "path"', 'source = "push"'));
      await waitForStatus(world, "live", (s) => s.health === "Stopped").catch(() => undefined);
      await last.stop();
    }
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 120_000);

const statuses = (from = 0): ClusterStatus[] =>
  stream.events
    .slice(from)
    .filter((e) => e.event === "status")
    .map((e) => e.data as ClusterStatus);
const condition = (s: ClusterStatus, type: string) => s.conditions.find((c) => c.type === type);

test("staging progress reaches the stream while the model is staged, before the launch", async () => {
  // source "push": the model is copied to each node's model_dir (a "path" model is used where it lies, nothing to stage).
  const text = definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) });
  await writeDefinition(world, "live", text.replace('source = "path"', 'source = "push"'));
  await stream.waitFor((e) => e.event === "status" && (e.data as ClusterStatus).health === "Healthy", 60_000);
  const seen = statuses().filter((s) => s.cluster === "live");
  seen.forEach((s, i) => assertSchema(s, "status", `streamed status ${i}`));
  const staging = seen.findIndex((s) => condition(s, "Reconciling")?.reason === "Staging" && s.staging.length > 0);
  const launching = seen.findIndex((s) => condition(s, "Reconciling")?.reason === "Launching");
  expect(staging, JSON.stringify(seen.map((s) => [condition(s, "Reconciling")?.reason, s.staging]))).toBeGreaterThanOrEqual(0);
  expect(staging).toBeLessThan(launching);
  expect(seen[staging]!.health).toBe("Progressing");
}, 90_000);

test("a stage's death is streamed and written (Unhealthy, Ready withdrawn) before the relaunch's Healthy", async () => {
  const running = await waitForStatus(world, "live", (s) => s.health === "Healthy" && s.stages.length === 2 && s.stages.every((x) => x.alive));
  const from = stream.events.length;
  process.kill(await enginePidOf(running.stages[0]!.pid!), "SIGKILL");
  await stream.waitFor((e) => e.event === "status" && (e.data as ClusterStatus).health === "Unhealthy", 30_000, from);
  await stream.waitFor((e) => e.event === "status" && (e.data as ClusterStatus).health === "Healthy", 60_000, from);
  const after = statuses(from);
  const death = after.findIndex((s) => s.health === "Unhealthy");
  const healthy = after.findIndex((s) => s.health === "Healthy");
  expect(death).toBeGreaterThanOrEqual(0);
  expect(death).toBeLessThan(healthy);
  expect(condition(after[death]!, "Ready")).toMatchObject({ status: "False", reason: expect.stringMatching(/Died$/) });
  // The status file said the same: a version with the death was written, not only streamed.
  const written = world.audit.statusesOf("live");
  expect(written.some((s) => s.health === "Unhealthy" && condition(s, "Ready")?.reason === condition(after[death]!, "Ready")?.reason)).toBe(true);
  expect(world.audit.problems).toEqual([]);
}, 90_000);

test("a daemon that stops with --teardown-on-exit streams the teardown to its last Stopped, then ends the stream; it takes no request meanwhile", async () => {
  // This file's daemon leaves the cluster running; one that tears down on exit takes it over.
  await daemon.stop();
  const log = pino({ level: "debug" }, pino.destination({ dest: join(world.root, "daemon-teardown.log"), sync: true }));
  const tearing = await startDaemon({ dir: world.clustersDir, settingsFile: world.settingsFile, log, resyncMs: 60_000, debounceMs: 50, teardownOnExit: true });
  const reader = new SseReader(new URL("api/events", tearing.uiUrl).href);
  try {
    await reader.waitFor((e) => e.event === "status" && (e.data as ClusterStatus).cluster === "live" && (e.data as ClusterStatus).health === "Healthy", 60_000);
    const stopped = tearing.stop();
    // Asked while it stops (the teardown's questions to the nodes take longer than this one): refused.
    const asked = await fetch(new URL("api/clusters/live/reconcile", tearing.uiUrl), { method: "POST" });
    expect(asked.status).toBe(503);
    expect(((await asked.json()) as { error: { reason: string } }).error.reason).toBe("DashboardDaemonStopping");
    const last = await reader.waitFor((e) => e.event === "status" && (e.data as ClusterStatus).health === "Stopped", 60_000);
    expect(condition(last.data as ClusterStatus, "Ready")).toMatchObject({ status: "False" });
    await stopped;
    await reader.done;
    expect(reader.ended).toBe(true);
  } finally {
    reader.close();
    await tearing.stop();
  }
}, 120_000);
