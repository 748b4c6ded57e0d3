/**
 * The link between two pipeline stages cut while the cluster serves, on a lab of network
 * namespaces (test/faults/support/netns.ts): the daemon, the embedded router and the coordinator in
 * the root namespace, stage-0 on n1 and stage-1 on n2, each host in its own namespace. The cut is
 * iptables DROP in n1's namespace for n2's address only, both ways (no FIN, no RST): the daemon and
 * the coordinator still reach both hosts; only the stage-to-stage link goes silent.
 *
 * Neither stage stopped answering: each is cut off from one peer only. The first end to reach its
 * liveness bound (transport/liveness.ts) exits with status 69 naming the other as silent. The other
 * names it back when it reaches its own bound in time (up to two heartbeats later: the daemon asks
 * the named member again after that skew, `linkSkewMs`), but is more often ended first by the
 * pipeline's collapse (the coordinator exiting, the teardown) and never says so; the coordinator,
 * which still heard it as the pipeline broke, does ("peer answering"). Either way the daemon's
 * record of the death (src/reconciler/record-death.ts) must not name a stage as "the member that
 * stopped answering". Which end reports first, and how far apart, depends on the heartbeats' phase
 * at the cut, so the link is cut three times.
 *
 * Shown, each time: Ready=False within the liveness bound plus the daemon's detection; no status
 * written from the cut until the cluster is back names a silent member (Ready, Reconciling,
 * lastError, the restart evidence, the timeline); after the heal, Ready=True with one engine set and
 * a completion.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { chat, sleep } from "../reconciler/daemon-fixture.js";
import { expectBackWhole, expectCutDeath, holdAfterNotReadyMs } from "./support/cut-checks.js";
import { enginesPerPlace, watchDeathWords } from "./support/death-words.js";
import { useLabCluster } from "./support/lab-cluster.js";
import type { LabHost } from "./support/netns.js";
import { until } from "./support/world-checks.js";

const run = promisify(execFile);
const name = "stagecut";
const cuts = 3;

let cut: StageLinkCut | undefined;
// Four layers over two stages; the daemon runs at the production health timings. Every cut costs
// a launch of the restart budget.
const cluster = useLabCluster(name, { hosts: 2, layers: 4, restartBudget: cuts + 8, define: {}, beforeClose: async () => cut?.heal() });

interface StageLinkCut {
  heal(): Promise<void>;
}

/** Drop every packet between `a` and `b` (iptables in `a`'s namespace, both directions); each keeps reaching everyone else. */
async function cutBetween(a: LabHost, b: LabHost): Promise<StageLinkCut> {
  const rules = [
    ["INPUT", "-s", b.address, "-j", "DROP"],
    ["OUTPUT", "-d", b.address, "-j", "DROP"],
  ];
  const iptables = (args: string[]) => run("ip", ["netns", "exec", a.netns, "iptables", "-w", ...args]);
  for (const rule of rules) await iptables(["-I", ...rule]);
  let healed = false;
  return {
    heal: async () => {
      if (healed) return;
      healed = true;
      for (const rule of rules) await iptables(["-D", ...rule]);
    },
  };
}

/** Cut n1↔n2, check the cluster down and its words, heal, check it back. */
async function cutOnce(round: number): Promise<void> {
  const [n1, n2] = [cluster.lab.hosts[0]!, cluster.lab.hosts[1]!];
  const before = await cluster.status();
  expect(await chat(before.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
  expect(await enginesPerPlace(cluster.world, cluster.lab)).toEqual([1, 1, 1]);
  const deathsBefore = before.restarts?.evidence.length ?? 0;

  const cutAt = Date.now();
  const watcher = await watchDeathWords(cluster.world, name, cutAt);
  const timings: Record<string, number> = {};
  let death: string | undefined;
  try {
    cut = await cutBetween(n1, n2);
    const found = await expectCutDeath(cluster.world, name, round, cutAt, deathsBefore);
    death = found.death;
    timings.notReady = found.notReady;
    timings.detection = found.detection;
    // Shorter than the relaunch's dial of the next stage (--connect-timeout-ms 5000): the relaunch
    // begun meanwhile is still waiting on the link when it heals.
    await sleep(holdAfterNotReadyMs);
  } finally {
    timings.healedAfter = Date.now() - cutAt;
    await cut?.heal();
  }

  const healedAt = Date.now();
  const ready = await cluster.waitForReady(60_000);
  timings.readyAfterHeal = Date.now() - healedAt;
  const { namings, readyLines, lastWords } = await watcher.stop();
  console.log(
    `stage link cut ${round}: ${death ?? "no death recorded"}, timings ms ${JSON.stringify(timings)}\n  Ready as written:\n    ${readyLines.join("\n    ")}\n  the members' words:\n    ${lastWords.join("\n    ")}`,
  );
  await expectBackWhole(cluster.world, cluster.lab, round, ready, namings, "the link between the two stages");
}

/**
 * A cut that outlasts the relaunches' dial of the next stage (--connect-timeout-ms 5000): each
 * relaunch fails because stage-0 cannot reach stage-1, and the status must say that, whichever step
 * noticed first (the coordinator exiting, its /health never answering), not blame the coordinator;
 * and those launches must not spend the restart budget, or a cut of a few launches would stall the
 * cluster for good.
 */
async function cutThroughRelaunch(): Promise<void> {
  const [n1, n2] = [cluster.lab.hosts[0]!, cluster.lab.hosts[1]!];
  const before = await cluster.status();
  const evidenceBefore = before.restarts?.evidence.length ?? 0;
  const launchesBefore = before.restarts?.count ?? 0;
  const cutAt = Date.now();
  let failed: Array<{ reason: string; message: string }> = [];
  try {
    cut = await cutBetween(n1, n2);
    // The death (about 2.5 s), then relaunches whose stage-0 dials stage-1 for 5 s and gives up:
    // held through two of them.
    await until(
      async () => {
        const evidence = (await cluster.status()).restarts?.evidence ?? [];
        failed = evidence.slice(evidenceBefore).filter((e) => e.reason !== "StageDied" && e.reason !== "CoordinatorDied");
        return failed.length >= 2 || failed.some((e) => e.reason !== "StageLinkUnreachable");
      },
      40_000,
      "two relaunches failing while the link is cut",
      50,
    );
  } finally {
    await cut?.heal();
  }
  console.log(`stage link cut through relaunches: ${Date.now() - cutAt} ms; the launches failed with ${JSON.stringify(failed)}`);
  for (const f of failed) {
    expect(f.reason).toBe("StageLinkUnreachable");
    expect(f.message).toMatch(/^stage-0 on n1 could not reach the next stage, stage-1 at \S+:\d+ \(.+\): the link between their nodes is down or blocked; /);
  }
  const ready = await cluster.waitForReady(60_000);
  // The launches that failed on the link were given back to the budget: only the one that serves counts.
  expect(ready.restarts?.count, "launches counted at this revision").toBe(launchesBefore + 1);
  expect(await enginesPerPlace(cluster.world, cluster.lab)).toEqual([1, 1, 1]);
  expect(await chat(ready.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
}

it(`the link between two stages cut ${cuts} times: Ready=False within the liveness bound, no member named as the one that stopped answering, one engine set after each heal`, async () => {
  for (let round = 1; round <= cuts; round++) await cutOnce(round);
  expect(cluster.world.audit.problems).toEqual([]);
}, 120_000);

it("a cut that outlasts two relaunches: each fails naming the link between the stages, none counts against the restart budget, and the cluster serves again after the heal", async () => {
  await cutThroughRelaunch();
  expect(cluster.world.audit.problems).toEqual([]);
}, 120_000);
