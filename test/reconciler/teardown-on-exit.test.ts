/**
 * A daemon run with --teardown-on-exit (the demo's way, and every rehearsal's) tears its clusters
 * down as it exits: a deliberate stop, not a failure, so the next start's launch does not count
 * against the restart budget of the one before. The daemons run in this process on two local nodes.
 */
import { expect, test } from "vitest";
import { fastMonitor, readStatusFile, startInProcessDaemon } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true }, daemon: "none" });

test("each start after a --teardown-on-exit stop launches with a fresh restart budget: three starts are three first launches, never a stall", async () => {
  const { world } = dw;
  const revision = await dw.define("cycled", { nodes: ["l1", "l2"] });
  for (let start = 1; start <= 3; start++) {
    const daemon = await startInProcessDaemon(world, 60_000, fastMonitor, {}, { logName: `daemon-${start}.log`, teardownOnExit: true });
    try {
      const serving = await dw.waitServing("cycled", revision);
      expect(serving.restarts, `start ${start}`).toMatchObject({ revision, count: 1 });
    } finally {
      await daemon.stop();
    }
    const stopped = await readStatusFile(world, "cycled");
    expect(stopped?.health).toBe("Stopped");
    expect(stopped?.restarts?.count ?? 0, `after start ${start}`).toBe(0);
  }
}, 180_000);
