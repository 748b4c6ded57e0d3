/**
 * A stop asked for while a stage host's SSH is gone (lab of network namespaces,
 * test/faults/support/netns.ts: stage-0 on n1, stage-1 on n2, n2's sshd killed while the pipeline
 * serves): the teardown cannot reach n2's stage, which may well still run. While that lasts the
 * status says so: stage-1's card with its liveness unknown and StagesListening Unknown naming it,
 * never "no stage runs"; once n2's sshd is back the stage is stopped and the cluster reads Stopped.
 */
import { expect, it } from "vitest";
import { conditionOf } from "../reconciler/daemon-fixture.js";
import { useLabCluster } from "./support/lab-cluster.js";

const name = "stopcut";
const cluster = useLabCluster(name, { hosts: 2, layers: 4, restartBudget: 3, define: {} });

it("a stop while a stage host's SSH is gone: the stage it could not stop reads unknown, not stopped, until the host answers again", async () => {
  const n2 = cluster.lab.hosts[1]!;
  await n2.killSshd();
  try {
    await cluster.waitFor((s) => s.health === "Degraded", 15_000);
    await cluster.define({ desired: "stopped" });
    const held = await cluster.waitFor((s) => s.lastError?.reason === "TeardownIncomplete", 60_000);
    expect(conditionOf(held, "StagesListening")).toMatchObject({ status: "Unknown", reason: "TeardownIncomplete" });
    expect(conditionOf(held, "StagesListening")?.message).toMatch(/^stage-1 \(pid \d+ on n2\) could not be stopped \(its node did not answer\): it may still run/);
    expect(held.stages.map((c) => `${c.index} ${c.node} ${c.alive} ${c.liveness}`)).toEqual(["1 n2 false unknown"]);
  } finally {
    await n2.startSshd();
  }
  const stopped = await cluster.waitFor((s) => s.health === "Stopped", 60_000);
  expect(conditionOf(stopped, "StagesListening")).toMatchObject({ status: "False", reason: "NotRunning" });
  expect(stopped.stages).toEqual([]);
  expect(await cluster.ledger()).toBeUndefined();
}, 180_000);
