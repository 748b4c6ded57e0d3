/**
 * A daemon restarted beside a running cluster watches it while it plans. Planning probes every node,
 * and an engine's version probe alone can take 30 s (mlx-lm importing its modules on a loaded node):
 * a restarted daemon watched nothing until its plan was made, so a ring that hung meanwhile read
 * Healthy, and was served, for over a minute. Here the engine's `--version` hangs while a flag file
 * exists; a stage killed meanwhile must be found dead while the plan still waits on it.
 */
import { existsSync } from "node:fs";
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { conditionOf, waitForStatus, writeWrappedEngine } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("a stage killed while a restarted daemon's plan waits on a node is found dead then, not once the plan is made", async () => {
  const { world } = dw;
  const flag = join(world.root, "version-hangs");
  const asked = join(world.root, "version-asked");
  // `--version` says it was asked, then waits while the flag exists, 60 s at most; everything else is the real engine.
  const binary = await writeWrappedEngine(
    world,
    "version-hangs.sh",
    `if [ "$1" = "--version" ]; then : > ${JSON.stringify(asked)}; i=0; while [ -e ${JSON.stringify(flag)} ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); done; fi`,
  );
  const revision = await dw.define("watched", { nodes: ["l1", "l2"], binary });
  await dw.waitServing("watched", revision, 90_000);
  await dw.stopDaemon();
  await writeFile(flag, "");
  await rm(asked, { force: true });
  try {
    await dw.startDaemon();
    // The new daemon's first pass is planning: its version probe hangs on the flag.
    const deadline = Date.now() + 60_000;
    while (!existsSync(asked) && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    expect(existsSync(asked)).toBe(true);
    const stage = (await new Ledger(world.stateDir).read("watched"))!.processes.find((p) => p.role === "stage")!;
    const killedAt = Date.now();
    process.kill(stage.pid, "SIGKILL");
    const dead = await waitForStatus(world, "watched", (s) => conditionOf(s, "Ready")?.reason === "StageDied", 20_000);
    expect(Date.now() - killedAt).toBeLessThan(20_000);
    expect(conditionOf(dead, "Ready")?.message).toContain(`pid ${stage.pid}`);
  } finally {
    await rm(flag, { force: true });
  }
  // The plan made at last, the cluster is launched again.
  await dw.waitServing("watched", revision, 90_000);
}, 240_000);
