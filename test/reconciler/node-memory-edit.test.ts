/**
 * A serving cluster edited to a plan its nodes' declared memory cannot hold beside another
 * cluster's keeps serving its revision (NodeMemoryTaken, said before anything is staged or torn
 * down) and moves to the edit once the other is removed. The daemon runs in this process on two
 * local nodes declared with 700 KiB each (583.3 KiB for models at the reference engine's headroom
 * 1.2): a 2-stage cluster of the test model at context 256 puts 248.5 KiB on each, at context 1024
 * 440.5 KiB, so two fit at 256 but not one at 1024 beside one at 256.
 */
import { expect, test } from "vitest";
import { conditionOf, removeDefinition, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, nodeMemory: "700KiB" } });

test("a serving cluster edited to need the memory another cluster holds keeps serving, says so, and moves once the other is removed", async () => {
  const { world } = dw;
  await dw.waitServing("holder", await dw.define("holder", { nodes: ["l1", "l2"] }), 90_000);
  const { port, portRange } = await dw.freeAddresses();
  const serving = await dw.waitServing("grower", await dw.define("grower", { nodes: ["l1", "l2"], port, portRange }), 90_000);
  const grown = await dw.define("grower", { nodes: ["l1", "l2"], port, portRange, contextLength: 1024 });
  const refused = await waitForStatus(world, "grower", (s) => s.lastError?.reason === "NodeMemoryTaken", 60_000);
  // What served before the edit serves on: the same processes, Ready, nothing torn down for a launch that could not run.
  expect(conditionOf(refused, "Ready")?.status).toBe("True");
  expect(refused.stages.map((s) => s.pid)).toEqual(serving.stages.map((s) => s.pid));
  expect(refused.lastError?.message).toMatch(/^node l[12] has 583\.3 KiB for models .* of which cluster holder [\d.]+ KiB hold/);
  expect(refused.restarts?.count).toBe(0);
  const answer = await fetch(`${refused.coordinator!.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: "hello", max_tokens: 2 }),
  });
  expect(answer.status).toBe(200);
  expect(await removeDefinition(world, "holder", 60_000)).toBe(true);
  const moved = await dw.waitServing("grower", grown, 60_000);
  expect(moved.stages.map((s) => s.pid)).not.toEqual(serving.stages.map((s) => s.pid));
}, 240_000);
