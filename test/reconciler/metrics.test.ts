/** `/metrics` (Prometheus text format): passes by result, pass duration, clusters by health, stages up. */
import { readFile, writeFile } from "node:fs/promises";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { allocateHost } from "../support/test-world.js";
import {
  definitionText,
  freePort,
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
let url: string;

beforeAll(async () => {
  world = await startWorld();
  await writeSettings(world, { enabled: false });
  // A leased address: the port found free stays free until the daemon binds it (nobody else uses the host).
  const host = await allocateHost();
  const port = await freePort(host);
  const settings = await readFile(world.settingsFile, "utf8");
  await writeFile(world.settingsFile, settings.replace("[daemon]\n", `[daemon]\nmetrics_address = "${host}:${port}"\n`));
  url = `http://${host}:${port}/metrics`;
  daemon = await startInProcessDaemon(world);
});

afterAll(async () => {
  await daemon?.stop();
  await world?.close();
});

test("serves passes by result, pass duration, clusters by health and stages up", async () => {
  await writeDefinition(world, "m1", definitionText(world, { nodes: ["l1", "l2"] }));
  await writeDefinition(world, "m2", definitionText(world, { nodes: ["l2", "l1"], suspend: true }));
  const [r1, r2] = [await revisionOf(world, "m1"), await revisionOf(world, "m2")];
  await waitForStatus(world, "m1", (s) => s.observedRevision === r1 && s.health === "Disabled");
  await waitForStatus(world, "m2", (s) => s.observedRevision === r2 && s.health === "Suspended");
  await daemon.whenIdle();

  const response = await fetch(url);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
  const text = await response.text();
  expect(text).toMatch(/^shardctl_reconcile_passes_total\{result="success"\} [1-9]\d*$/m);
  expect(text).toMatch(/^shardctl_reconcile_pass_duration_seconds_count [1-9]\d*$/m);
  expect(text).toMatch(/^shardctl_clusters\{health="Disabled"\} 1$/m);
  expect(text).toMatch(/^shardctl_clusters\{health="Suspended"\} 1$/m);
  expect(text).toMatch(/^shardctl_clusters\{health="Healthy"\} 0$/m);
  expect(text).toMatch(/^shardctl_stages_up 0$/m);
  expect((await fetch(url.replace("/metrics", "/other"))).status).toBe(404);
});
