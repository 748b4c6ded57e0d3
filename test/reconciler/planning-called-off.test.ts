/**
 * Planning yields as a launch does: an engine's version command may take 30 s before it is given up
 * (the probe's deadline), and a pass that waits on it must not hold back a fix of its definition,
 * nor the daemon's stop. The daemon runs in this process on two local nodes; the engine is a
 * wrapper that answers nothing, `--version` included, while its flag file exists.
 */
import { rm } from "node:fs/promises";
import { expect, test } from "vitest";
import { conditionOf, removeDefinition, waitForStatus, writeHangingEngine } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true } });

test("a definition fixed while its plan waits on a hung version command is planned anew at once, not after the 30 s deadline", async () => {
  const { world } = dw;
  const { binary, flag } = await writeHangingEngine(world);
  try {
    await dw.define("fixed", { nodes: ["l1", "l2"], binary });
    await waitForStatus(world, "fixed", (s) => conditionOf(s, "Reconciling")?.reason === "Planning", 10_000);
    // The operator points the definition at the bundled engine while the version command hangs.
    const fixedAt = Date.now();
    const revision = await dw.define("fixed", { nodes: ["l1", "l2"] });
    await dw.waitServing("fixed", revision, 60_000);
    const readyAfterMs = Date.now() - fixedAt;
    console.log(`Ready ${readyAfterMs} ms after the fix`);
    // The hung probe is called off within a second (the definition is looked at every second).
    expect(readyAfterMs).toBeLessThan(20_000);
  } finally {
    await rm(flag, { force: true });
  }
  expect(await removeDefinition(world, "fixed")).toBe(true);
}, 120_000);

test("the daemon stops within seconds while a plan waits on a hung version command; its next start takes the definition up", async () => {
  const { world } = dw;
  const { binary, flag } = await writeHangingEngine(world);
  try {
    await dw.define("hung", { nodes: ["l1", "l2"], binary });
    await waitForStatus(world, "hung", (s) => conditionOf(s, "Reconciling")?.reason === "Planning", 10_000);
    const stoppingAt = Date.now();
    await dw.stopDaemon();
    const stopMs = Date.now() - stoppingAt;
    console.log(`daemon stopped in ${stopMs} ms`);
    expect(stopMs).toBeLessThan(10_000);
    const left = await waitForStatus(world, "hung", () => true);
    expect(conditionOf(left!, "Reconciling")).toMatchObject({ status: "True", reason: "DaemonStopping" });
    expect(conditionOf(left!, "Reconciling")?.message).toMatch(/at the plan step: the daemon is stopping; the daemon's next start takes it up again/);
  } finally {
    await rm(flag, { force: true });
    await dw.startDaemon();
  }
  expect(await removeDefinition(world, "hung", 60_000)).toBe(true);
}, 120_000);
