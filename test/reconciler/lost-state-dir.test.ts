/**
 * The state directory removed under a running daemon (a `git clean -X` of a checkout that holds
 * it, an `rm -rf`): the ledger entry of the launch it watches is written again from what it holds,
 * the serving cluster goes on untouched (same processes, no launch counted) and the log says so.
 * The daemon runs in this process on two local nodes.
 */
import { readFile, rm } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { sleep, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { isServingAt, useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("a state directory removed while a cluster serves: its ledger entry is written again, nothing is launched or stopped", async () => {
  const { world } = dw;
  const revision = await dw.define("kept", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("kept", revision);
  const pids = serving.stages.map((s) => s.pid);
  const launched = (await new Ledger(world.stateDir).read("kept"))!;

  await rm(world.stateDir, { recursive: true, force: true });
  // A pass looks again: the definition written anew (the same text) asks for one.
  await writeDefinition(world, "kept", await readFile(join(world.clustersDir, "kept.toml"), "utf8"));
  const log = () => readFile(join(world.root, "daemon.log"), "utf8");
  const deadline = Date.now() + 20_000;
  while (!(await log()).includes("the ledger entry of the launch this daemon watches was gone") && Date.now() < deadline) await sleep(100);
  expect(await log()).toContain("the ledger entry of the launch this daemon watches was gone");
  expect(await new Ledger(world.stateDir).read("kept")).toEqual(launched);

  // A few passes later: the same processes serve, and the launch that made them is the only one counted.
  await writeDefinition(world, "kept", await readFile(join(world.clustersDir, "kept.toml"), "utf8"));
  await sleep(2_000);
  const still = await waitForStatus(world, "kept", (s) => isServingAt(s, revision), 10_000);
  expect(still.stages.map((s) => s.pid)).toEqual(pids);
  expect(still.restarts).toMatchObject({ revision, count: 1 });
  expect(still.health).toBe("Healthy");
}, 120_000);
