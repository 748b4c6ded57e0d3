/**
 * A death that spends the last launch of the restart budget, on a host that stays cut off (lab of
 * network namespaces, test/faults/support/netns.ts: stage-0 on n1, stage-1 on n2, iptables DROP
 * both ways). The teardown cannot end while n2 is silent, and a pass after the death fails on it
 * again and again, but whether the cluster comes back by itself is known at the death: every
 * status written from then on says Stalled (health and condition, RestartBudgetExhausted), never
 * "running at the desired revision", and Ready says the death, then the teardown that cannot end,
 * rather than flipping to Replacing at each retry. After the heal it is torn down and nothing is launched.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { conditionOf, sleep } from "../reconciler/daemon-fixture.js";
import { useLabCluster } from "./support/lab-cluster.js";
import { enginePids, recordStatusWrites, until } from "./support/world-checks.js";

const name = "stallcut";
const cluster = useLabCluster(name, { hosts: 2, layers: 4, restartBudget: 1, cutOff: 1, define: {} });

it("the budget's last launch dies on a host that stays cut off: Stalled from the death on, Ready says the death then the unfinished teardown, nothing relaunched after the heal", async () => {
  const n2 = cluster.lab.hosts[1]!;
  const serving = await readFile(join(cluster.world.clustersDir, `${name}.status.json`), "utf8");
  expect((JSON.parse(serving) as ClusterStatus).restarts).toMatchObject({ count: 1, budget: 1 });
  let cutOff = true;
  const recording = recordStatusWrites(cluster.world, name, () => cutOff, { pollMs: 20, before: serving });
  const cutAt = Date.now();
  try {
    await n2.partition();
    const stalled = await cluster.waitFor((s) => s.health === "Stalled", 30_000);
    console.log(`stalled while cut: Stalled ${Date.now() - cutAt} ms after the cut`);
    expect(conditionOf(stalled, "Stalled")).toMatchObject({ status: "True", reason: "RestartBudgetExhausted" });
    expect(conditionOf(stalled, "Stalled")?.message).toMatch(/^launched 1 times at this revision \(budget 1\); the last failure: [A-Z]\w+: /);
    // Passes retry the teardown of n2's stage while it is cut off: watch two of them fail.
    const failures = new Set<string>();
    await until(
      async () => {
        const s = await cluster.status();
        // Each failed pass stamps lastError anew.
        if (s.lastError?.reason === "TeardownIncomplete") failures.add(s.lastError.at);
        return failures.size >= 2;
      },
      60_000,
      "two failed teardown passes while n2 is cut off",
      100,
    );
    // What the teardown could not stop is not said to be stopped: it may still run.
    const held = await cluster.status();
    expect(conditionOf(held, "StagesListening")).toMatchObject({ status: "Unknown", reason: "TeardownIncomplete" });
    expect(conditionOf(held, "StagesListening")?.message).toMatch(/^stage-1 \(pid \d+ on n2\) could not be stopped \(its node did not answer\): it may still run/);
    // Its card says so too, though the death's teardown left no look at it: from the plan.
    expect(held.stages.map((c) => `${c.index} ${c.node} ${c.liveness}`)).toEqual(["1 n2 unknown"]);
    await sleep(500);
  } finally {
    await n2.heal();
    cutOff = false;
    await recording.done;
  }
  const shown = recording.writes.map((w) => {
    const ready = conditionOf(w.status, "Ready");
    const stall = conditionOf(w.status, "Stalled");
    return `+${w.at - cutAt} ms ${w.status.health} Ready=${ready?.status} ${ready?.reason} Stalled=${stall?.status} ${stall?.reason}: ${stall?.message.slice(0, 60)}`;
  });
  console.log(`status writes while cut off:\n  ${shown.join("\n  ")}`);
  // From the first write that withdrew Ready on: Stalled, in health and condition, with Ready down
  // for the death's reason, then for the teardown that cannot end (never Replacing, never "running
  // at the desired revision").
  const down = recording.writes.findIndex((w) => conditionOf(w.status, "Ready")?.status === "False");
  expect(down, shown.join("\n")).toBeGreaterThanOrEqual(0);
  for (const [i, w] of recording.writes.slice(down).entries()) {
    expect(w.status.health, shown[down + i]).toBe("Stalled");
    expect(conditionOf(w.status, "Stalled"), shown[down + i]).toMatchObject({ status: "True", reason: "RestartBudgetExhausted" });
    expect(conditionOf(w.status, "Ready")?.reason, shown[down + i]).toMatch(/^(StageDied|StagePortClosed|CoordinatorDied|CoordinatorUnhealthy|TeardownIncomplete)$/);
  }
  // After the heal: torn down, and nothing launched again.
  await until(async () => (await cluster.ledger()) === undefined, 60_000, "the ledger entry gone once n2 answers");
  await sleep(3_000);
  expect(await enginePids(cluster.world)).toEqual([]);
  const after = await cluster.status();
  expect(after.health).toBe("Stalled");
  expect(after.restarts?.count).toBe(1);
  expect(cluster.world.audit.problems).toEqual([]);
}, 180_000);
