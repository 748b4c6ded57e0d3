/**
 * A pass gives its place in the work queue back while it plans: planning waits on the nodes (an
 * engine's version command may take 30 s before it is given up) and on the model's source. Four
 * definitions whose engine hangs on `--version` held the daemon's four places, and every other
 * cluster's delete, relaunch or launch waited behind them for 30 s at a time. A definition that
 * plans says so in its status as it begins, not once its nodes answered. The daemon runs in this
 * process on two local nodes.
 */
import { rm } from "node:fs/promises";
import { expect, test } from "vitest";
import { conditionOf, isReadyAt, removeDefinition, waitForStatus, writeHangingEngine } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("four definitions whose engine hangs on --version do not hold back another cluster's launch; each says it plans", async () => {
  const { world } = dw;
  // The engine answers nothing, --version included, while the flag file exists.
  const { binary, flag } = await writeHangingEngine(world);
  const hung = ["hung-1", "hung-2", "hung-3", "hung-4"];
  try {
    for (const name of hung) await dw.define(name, { nodes: ["l1", "l2"], binary });
    // Each has a status while it plans, long before its version command is given up (30 s).
    for (const name of hung) {
      const planning = await waitForStatus(world, name, (s) => conditionOf(s, "Reconciling")?.reason === "Planning", 10_000);
      expect(conditionOf(planning, "Reconciling")?.message).toBe("planning: reading the model and probing the nodes");
    }
    const startedAt = Date.now();
    const revision = await dw.define("beside", { nodes: ["l1", "l2"] });
    await waitForStatus(world, "beside", (s) => isReadyAt(s, revision), 60_000);
    // Launched while the four still wait on their nodes: not after their version commands gave up.
    const readyAfterMs = Date.now() - startedAt;
    expect(readyAfterMs).toBeLessThan(25_000);
    for (const name of hung) expect(conditionOf((await waitForStatus(world, name, () => true))!, "Reconciling")?.reason).toBe("Planning");
  } finally {
    await rm(flag, { force: true });
    for (const name of hung) await removeDefinition(world, name, 60_000);
  }
  expect(await removeDefinition(world, "beside")).toBe(true);
}, 180_000);
