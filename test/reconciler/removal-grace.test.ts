/**
 * A definition gone for a moment (a checkout switching commits, a tool that removes a file before
 * writing it again, a `mv` undone) costs nothing: what runs is torn down only once the definition
 * has been gone for the removal grace (2 s), and the status says so meanwhile. One gone for good is
 * pruned after it.
 */
import { readFile, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { conditionOf, isReadyAt, readStatusFile, sleep, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("a definition removed and put back within a second: nothing is torn down; one gone for good is pruned after the grace", async () => {
  const { world } = dw;
  const revision = await dw.define("blinking", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("blinking", revision, 90_000);
  const file = join(world.clustersDir, "blinking.toml");
  const text = await readFile(file, "utf8");
  const seenBefore = world.audit.versions.length;

  await rm(file);
  const gone = await waitForStatus(world, "blinking", (s) => conditionOf(s, "Reconciling")?.reason === "DefinitionRemoved", 10_000);
  expect(conditionOf(gone, "Reconciling")?.message).toMatch(/^the definition is gone: what runs is torn down in [12] s unless it comes back$/);
  expect(isReadyAt(gone, revision)).toBe(true);
  await writeFile(file, text);
  await waitForStatus(world, "blinking", (s) => isReadyAt(s, revision) && conditionOf(s, "Reconciling")?.reason !== "DefinitionRemoved", 10_000);
  await sleep(2_500);
  const after = (await readStatusFile(world, "blinking"))!;
  // The same processes serve: never withdrawn, never torn down.
  expect(after.coordinator?.pid).toBe(serving.coordinator?.pid);
  expect(after.stages.map((s) => s.pid)).toEqual(serving.stages.map((s) => s.pid));
  const written = world.audit.statusesOf("blinking", seenBefore);
  expect(written.filter((v) => conditionOf(v, "Ready")?.status !== "True")).toEqual([]);

  // Gone for good: pruned once the grace has passed.
  const removedAt = Date.now();
  await rm(file);
  while ((await readStatusFile(world, "blinking")) !== undefined && Date.now() - removedAt < 30_000) await sleep(100);
  expect(await readStatusFile(world, "blinking")).toBeUndefined();
  expect(Date.now() - removedAt).toBeGreaterThanOrEqual(2_000);
}, 180_000);
