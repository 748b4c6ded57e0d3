/**
 * The daemon killed (kill -9) the moment a stage host is partitioned, and started again while the
 * host is still cut off, on a lab of network namespaces (test/faults/support/netns.ts): the daemon
 * (a real `shardctl daemon` process, production timings), the embedded router and the coordinator
 * in the root namespace, stage-0 on n1 and stage-1 on n2, each host in its own namespace with its
 * own sshd (iptables DROP both ways: no FIN, no RST).
 *
 * The new daemon cannot plan the revision (planning probes every node, and n2 does not answer), but
 * what runs is that revision's launch and must be watched all the same: its broken pipeline is
 * found, Ready withdrawn, the router's backend removed and the reachable part stopped — here the
 * coordinator, which keeps answering 503 with its pipeline broken (`--broken-exit-delay-ms` 60 s) —
 * while n2 is still cut off. No status written while n2 is cut off says Ready=True. After the heal
 * the cluster serves again with one engine set, none of the old processes left.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { expect, it } from "vitest";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { chat, conditionOf, sleep } from "../reconciler/daemon-fixture.js";
import { enginesPerPlace } from "./support/death-words.js";
import { useLabCluster } from "./support/lab-cluster.js";
import { enginePids, isRunning, recordStatusWrites, routerBackends, until } from "./support/world-checks.js";

const name = "restartcut";
const cluster = useLabCluster(name, {
  hosts: 2,
  layers: 4,
  restartBudget: 4,
  daemon: "spawned",
  define: { extraArgs: ["--connect-timeout-ms", "5000", "--broken-exit-delay-ms", "60000"] },
  cutOff: 1,
});

/** Ready as written while `watching()`: each status file that differs from `before`, with the time it was read. */
function recordReady(before: string, watching: () => boolean): { writes: Array<{ at: number; ready: string }>; done: Promise<void> } {
  const recording = recordStatusWrites(cluster.world, name, watching, { pollMs: 20, before });
  const ready = (status: ClusterStatus): string => {
    const condition = conditionOf(status, "Ready");
    return `Ready=${condition?.status} ${condition?.reason}: ${condition?.message ?? ""}`;
  };
  return {
    get writes() {
      return recording.writes.map((w) => ({ at: w.at, ready: ready(w.status) }));
    },
    done: recording.done,
  };
}

it("a daemon restarted while a stage host is cut off watches what runs without a plan: the broken cluster deregistered and its reachable part stopped before the heal", async () => {
  const n2 = cluster.lab.hosts[1]!;
  const before = (await cluster.ledger())!;
  const coordinator = before.processes.find((p) => p.role === "coordinator")!;
  const oldPids = await enginePids(cluster.world);
  expect(await routerBackends(cluster.world)).toContain("url:");

  const serving = await readFile(join(cluster.world.clustersDir, `${name}.status.json`), "utf8");
  const cutAt = Date.now();
  let cutOff = true;
  const recording = recordReady(serving, () => cutOff);
  const timings: Record<string, number> = {};
  try {
    await n2.partition();
    const first = cluster.latestDaemon();
    first.child.kill("SIGKILL");
    await first.exited;
    await cluster.spawnDaemon();
    timings.restarted = Date.now() - cutAt;
    // The new daemon's planning waits out n2's SSH handshake (4 s) before it gives up on the plan.
    timings.deregistered = (await until(async () => !(await routerBackends(cluster.world)).includes("url:"), 20_000, "the router's backend removed", 50)) - cutAt;
    timings.coordinatorStopped = (await until(async () => !isRunning(coordinator.pid), 10_000, "the coordinator (reachable, answering 503) stopped", 50)) - cutAt;
    // The teardown ends once n2's questions time out (2 s): only what runs there is left, in the ledger.
    await until(async () => (await cluster.ledger())?.processes.every((p) => p.node === "n2") === true, 10_000, "only n2's stage left in the ledger", 50);
    expect((await cluster.ledger())?.phase).toBe("tearing-down");
    await sleep(1_000);
  } finally {
    await n2.heal();
    timings.healed = Date.now() - cutAt;
    cutOff = false;
    await recording.done;
  }
  const ready = await cluster.waitForReady(60_000);
  timings.readyAfterHeal = Date.now() - cutAt - timings.healed;
  console.log(
    `restart while cut: timings ms ${JSON.stringify(timings)}\n  Ready as written while cut off:\n    ${recording.writes.map((w) => `+${w.at - cutAt} ms ${w.ready}`).join("\n    ")}`,
  );

  expect(recording.writes.filter((w) => w.ready.startsWith("Ready=True")).map((w) => `+${w.at - cutAt} ms ${w.ready}`)).toEqual([]);
  const after = await enginePids(cluster.world);
  expect(
    after.filter((pid) => oldPids.includes(pid)),
    "none of the old processes left",
  ).toEqual([]);
  expect(await enginesPerPlace(cluster.world, cluster.lab), "one engine set after the heal (n1, n2, the root namespace)").toEqual([1, 1, 1]);
  expect(await routerBackends(cluster.world)).toContain("url:");
  expect(await chat(ready.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
  expect(cluster.world.audit.problems).toEqual([]);
}, 90_000);

it("a daemon restarted while a stage host's sshd is down (the pipeline serving) adopts what serves: Ready=True and Degraded naming the node, never Ready=False", async () => {
  const n2 = cluster.lab.hosts[1]!;
  const pids = await enginePids(cluster.world);
  const serving = await readFile(join(cluster.world.clustersDir, `${name}.status.json`), "utf8");
  const url = (JSON.parse(serving) as ClusterStatus).coordinator!.url;
  let watching = true;
  const recording = recordReady(serving, () => watching);
  const lostAt = Date.now();
  let degraded: ClusterStatus;
  try {
    await n2.killSshd();
    const first = cluster.latestDaemon();
    first.child.kill("SIGKILL");
    await first.exited;
    await cluster.spawnDaemon();
    // Planning gives up on n2 (its SSH refused); what serves is adopted and watched, n2 said unobservable.
    degraded = await cluster.waitFor((s) => s.health === "Degraded" && s.conditions.some((c) => c.reason === "NodeUnobservable"), 30_000);
    expect(await chat(url, cluster.world.modelDir)).toBeTypeOf("string");
  } finally {
    await n2.startSshd();
  }
  await cluster.waitForReady(30_000);
  watching = false;
  await recording.done;
  console.log(
    `restart while sshd is down: Degraded after ${Date.now() - lostAt} ms\n  Ready as written:\n    ${recording.writes.map((w) => `+${w.at - lostAt} ms ${w.ready}`).join("\n    ")}`,
  );
  expect(conditionOf(degraded, "Ready")?.status).toBe("True");
  expect(conditionOf(degraded, "StagesListening")?.message).toContain("node n2");
  expect(recording.writes.filter((w) => !w.ready.startsWith("Ready=True")).map((w) => `+${w.at - lostAt} ms ${w.ready}`)).toEqual([]);
  // The same processes throughout: adopted, never relaunched.
  expect(await enginePids(cluster.world)).toEqual(pids);
  expect(cluster.world.audit.problems).toEqual([]);
}, 90_000);
