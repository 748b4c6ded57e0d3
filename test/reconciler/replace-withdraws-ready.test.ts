// A replacement (an edit that needs a new launch) withdraws Ready in the status file before it
// tears anything down: the teardown can wait out grace periods or an unreachable node, and a reader
// of the file must not see Ready meanwhile. The new launch's steps reach the file as they happen. A real daemon (in this process, its dashboard's event
// stream recording every status it publishes) runs a two-stage cluster on two local nodes with the
// reference engine.
import { afterAll, beforeAll, expect, test } from "vitest";
import type { ClusterStatus, Daemon } from "../../src/reconciler/index.js";
import { SseReader, enableDashboard } from "../dashboard/support.js";
import {
  conditionOf,
  definitionText,
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
  if (world !== undefined) await removeDefinition(world, "truth", 60_000);
  await daemon?.stop();
  if (world !== undefined) {
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 120_000);

const statuses = (from = 0): ClusterStatus[] =>
  stream.events
    .slice(from)
    .filter((e) => e.event === "status")
    .map((e) => e.data as ClusterStatus)
    .filter((s) => s.cluster === "truth");

async function define(contextLength: number, port: number, portRange: string): Promise<string> {
  const text = definitionText(world, { nodes: ["l1", "l2"], port, portRange, contextLength });
  await writeDefinition(world, "truth", text);
  return revisionOf(world, "truth");
}

test("a replacement withdraws Ready in the status file before it stops anything", async () => {
  const port = await freePort();
  const portRange = await freePortRange(["127.0.0.1"]);
  const first = await define(256, port, portRange);
  const ready = await waitForStatus(world, "truth", (s) => isReadyAt(s, first) && s.stages.length === 2 && s.stages.every((c) => c.alive), 90_000);
  const oldPids = ready.stages.map((c) => c.pid);
  const from = stream.events.length;

  // A new context length is a new launch: the running one is replaced.
  const second = await define(128, port, portRange);
  await waitForStatus(world, "truth", (s) => isReadyAt(s, second), 90_000);
  const withdrawn = statuses(from).find((s) => conditionOf(s, "Ready")?.status !== "True");
  expect(conditionOf(withdrawn!, "Ready")).toMatchObject({ status: "False", reason: "Replacing" });
  expect(conditionOf(withdrawn!, "Reconciling")).toMatchObject({ status: "True", reason: "Replacing" });
  // Written while the old launch still ran: its stage cards are still the old processes'.
  expect(withdrawn!.stages.map((c) => c.pid)).toEqual(oldPids);
  // The new launch's steps reached the file as they happened, not only once it was ready.
  const launching = statuses(from).filter((s) => s.timeline.some((e) => e.step === "launch-started") && !s.timeline.some((e) => e.step === "ready"));
  expect(launching.some((s) => s.timeline.some((e) => e.step === "stage-0-listening"))).toBe(true);
  expect(launching.some((s) => s.timeline.some((e) => e.step === "coordinator-healthy"))).toBe(true);
}, 200_000);
