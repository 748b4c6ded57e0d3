// A replacement (an edit that needs a new launch) withdraws Ready in the status file before it
// tears anything down: the teardown can wait out grace periods or an unreachable node, and a reader
// of the file must not see Ready meanwhile. The new launch's steps reach the file as they happen. A real daemon (in this process, its dashboard's event
// stream recording every status it publishes) runs a two-stage cluster on two local nodes with the
// reference engine.
import { afterAll, beforeAll, expect, test } from "vitest";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { SseReader, enableDashboard } from "../dashboard/support.js";
import { conditionOf, isReadyAt, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, restartBudget: 5 }, prepare: (world) => enableDashboard(world) });
let stream: SseReader;

beforeAll(async () => {
  stream = new SseReader(new URL("api/events", dw.daemon.uiUrl).href);
  await stream.waitFor((e) => e.event === "hello");
});

afterAll(() => {
  stream?.close();
});

const statuses = (from = 0): ClusterStatus[] =>
  stream.events
    .slice(from)
    .filter((e) => e.event === "status")
    .map((e) => e.data as ClusterStatus)
    .filter((s) => s.cluster === "truth");

const define = (contextLength: number, port: number, portRange: string): Promise<string> => dw.define("truth", { nodes: ["l1", "l2"], port, portRange, contextLength });

test("a replacement withdraws Ready in the status file before it stops anything", async () => {
  const { world } = dw;
  const { port, portRange } = await dw.freeAddresses();
  const first = await define(256, port, portRange);
  const ready = await dw.waitServing("truth", first, 90_000);
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
