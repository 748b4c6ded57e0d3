/**
 * A daemon that starts without its ledger (the state directory wiped, as after a reboot onto a
 * fresh disk) beside a status file that said Ready: nothing of the cluster runs, and its passes fail
 * before they touch anything (the model cannot be read for the plan). The Ready carried over from the file is
 * withdrawn as soon as the pass sees that the ledger holds no launch, so `shardctl wait` does not
 * pass on a cluster that is down. The daemon runs in this process on two local nodes.
 */
import { rename } from "node:fs/promises";
import { expect, test } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import { conditionOf, killEnginesOf, runShardctl, waitForStatus } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

const dw = useDaemonWorld({ settings: { enabled: true, restartBudget: 3 } });

test("no ledger, a status file saying Ready, a failing pass: Ready is withdrawn, `wait` does not pass", async () => {
  const { world } = dw;
  const revision = await dw.define("lost", { nodes: ["l1", "l2"] });
  await dw.waitServing("lost", revision, 90_000);
  await dw.stopDaemon();
  await killEnginesOf(world);
  await new Ledger(world.stateDir).remove("lost");
  // The model is away (a disk not mounted yet): every pass fails at the plan, and is retried.
  const away = `${world.modelDir}.away`;
  await rename(world.modelDir, away);
  try {
    await dw.startDaemon();
    const failed = await waitForStatus(world, "lost", (s) => s.lastError?.reason === "ModelSourceUnreachable", 60_000);
    expect(conditionOf(failed, "Ready")).toMatchObject({ status: "False", reason: "ModelSourceUnreachable" });
    const waited = await runShardctl(world, ["wait", "lost", "--for", "condition=Ready", "--revision", revision, "--timeout", "3s"]);
    expect(waited.code).toBe(1);
  } finally {
    await rename(away, world.modelDir);
  }
  await dw.waitServing("lost", revision, 120_000);
}, 240_000);
