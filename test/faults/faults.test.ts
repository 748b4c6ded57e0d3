/**
 * Faults on a lab of network namespaces (test/faults/support/netns.ts): the daemon and the
 * coordinator in the root namespace, three stage hosts n1..n3 each in its own namespace with its own
 * veth address and real sshd. The daemon runs with the production health timings (poll 1000 ms,
 * probe deadline 1000 ms, 2 strikes) so the bounds asserted here are the ones operators get.
 *
 * - A partitioned stage host (iptables DROP both ways: no FIN, no RST): Ready=False within 1 s of
 *   the detection, the router deregistered and the reachable part torn down within 5 s of the
 *   partition; its engine stays in the ledger as a leftover until it heals; then it is stopped
 *   before anything is launched there, and the cluster converges with one engine per stage.
 * - sshd killed on a stage host while it serves: the cluster keeps serving (same processes), the
 *   status says Degraded naming the node, and Healthy again once sshd is back.
 * - A stage engine stopped with SIGSTOP: the coordinator's /health stops answering 200 (in-band
 *   heartbeats), and the daemon tears the cluster down within the heartbeat bound.
 */
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { chat, conditionOf, enginePidOf, enginesOf, isReadyAt, runShardctl, sleep } from "../reconciler/daemon-fixture.js";
import { useLabCluster } from "./support/lab-cluster.js";
import { routerBackends, until as untilHeld } from "./support/world-checks.js";

const name = "faulty";
// Six layers: two per stage (the engine splits ⌈L ÷ N⌉ per stage, so four would leave one empty).
// The stage hosts are fresh namespaces: every port there is free; only the root namespace is shared.
const cluster = useLabCluster(name, { hosts: 3, layers: 6, restartBudget: 10, define: { nodes: ["n1", "n2", "n3"] } });

/** Poll `check` every 25 ms (these tests time what they wait for) until it holds; the time it first held. */
function until(check: () => Promise<boolean>, timeoutMs: number, what: string): Promise<number> {
  return untilHeld(check, timeoutMs, what, 25);
}

/** Engine processes (shard-engine) per namespace host, and the coordinator's in the root namespace. */
async function enginePids(): Promise<{ hosts: number[][]; all: number[] }> {
  const all = (await enginesOf(cluster.world)).map((l) => Number(l.split(/\s+/)[0]));
  const hosts = await Promise.all(cluster.lab.hosts.map(async (h) => (await h.pids()).filter((p) => all.includes(p))));
  return { hosts, all };
}

describe("faults on namespaced hosts", () => {
  it("a partitioned stage host: Ready=False within 1 s of detection, deregistered and the reachable part down within 5 s; after heal one engine per stage", async () => {
    const before = await enginePids();
    expect(before.hosts.every((pids) => pids.length >= 1)).toBe(true);
    expect(await routerBackends(cluster.world)).toContain("url:");
    const host = cluster.lab.hosts[1]!;
    const reachable = [...before.hosts[0]!, ...before.hosts[2]!];
    const coordinator = before.all.filter((p) => !before.hosts.flat().includes(p));

    const partitionedAt = Date.now();
    await host.partition();
    try {
      const deregisteredAt = await until(async () => !(await routerBackends(cluster.world)).includes("url:"), 10_000, "router deregistration");
      const notReadyAt = await until(async () => conditionOf(await cluster.status(), "Ready")?.status === "False", 10_000, "Ready=False");
      const downAt = await until(async () => [...reachable, ...coordinator].every((pid) => !isRunning(pid)), 10_000, "the reachable part torn down");
      const status = await cluster.status();
      const evidence = status.restarts!.evidence.at(-1)!;
      const detectedAt = Date.parse(evidence.at);
      // The first evidence may be the cut-off stage's silence or a peer that gave up on it and exited.
      expect(evidence.reason).toMatch(/^(StagePortClosed|CoordinatorUnhealthy|StageDied|CoordinatorDied)$/);
      expect(detectedAt - partitionedAt).toBeLessThan(5_000);
      expect(notReadyAt - detectedAt).toBeLessThan(1_000);
      expect(deregisteredAt - partitionedAt).toBeLessThan(5_000);
      expect(downAt - partitionedAt).toBeLessThan(5_000);

      // While it is cut off, its engine is the one leftover in the ledger, and nothing is launched anywhere.
      const ledgerFile = join(cluster.world.stateDir, "ledger", `${name}.json`);
      const leftovers = async (): Promise<{ phase: string; processes: Array<{ node: string }> }> => JSON.parse(await readFile(ledgerFile, "utf8")) as never;
      await until(async () => (await leftovers()).processes.every((p) => p.node === "n2"), 10_000, "only n2's engine left in the ledger");
      expect((await leftovers()).phase).toBe("tearing-down");
      expect((await leftovers()).processes).toHaveLength(1);
      // The status says so: the cluster does not serve and may still run in part, which is
      // Unhealthy (not Progressing), its stage on n2 unknown.
      const held = await cluster.waitFor((s) => s.lastError?.reason === "TeardownIncomplete", 20_000);
      expect(held.health).toBe("Unhealthy");
      expect(conditionOf(held, "StagesListening")).toMatchObject({ status: "Unknown", reason: "TeardownIncomplete" });
      const listed = await runShardctl(cluster.world, ["status"]);
      expect(listed.stdout).toMatch(new RegExp(`^${name}\\s.*Unhealthy \\(TeardownIncomplete\\)`, "m"));
      // And so through the teardown's retries: never Progressing between two tries.
      const retriesUntil = Date.now() + 2_000;
      while (Date.now() < retriesUntil) {
        expect((await cluster.status()).health).toBe("Unhealthy");
        await sleep(100);
      }
      // (The cut-off engine may have given up on its peers and exited by itself meanwhile.)
      expect((await enginePids()).all.every((pid) => before.hosts[1]!.includes(pid))).toBe(true);
    } finally {
      await host.heal();
    }
    const ready = await cluster.waitFor((s) => isReadyAt(s, cluster.revision) && s.stages.every((c) => c.alive) && s.health === "Healthy", 60_000);
    const after = await enginePids();
    // One engine per stage host (the wrapper's engine), one coordinator; the old ones all gone.
    expect(after.hosts.map((pids) => pids.length)).toEqual(before.hosts.map((pids) => pids.length));
    expect(after.all.length).toBe(before.all.length);
    expect(before.all.some((pid) => isRunning(pid))).toBe(false);
    expect(await routerBackends(cluster.world)).toContain("url:");
    // The ports the ledger holds are the new launch's, and every one of them is in use by it.
    expect(ready.stages.map((c) => c.address)).toHaveLength(3);
    expect(await chat(`http://127.0.0.1:${new URL(ready.coordinator!.url).port}`, cluster.world.modelDir)).toBeTypeOf("string");
  }, 90_000);

  it("sshd killed on a stage host while it serves: keeps serving, Degraded naming the node, Healthy again when sshd returns", async () => {
    const before = await enginePids();
    const host = cluster.lab.hosts[2]!;
    const status0 = await cluster.status();
    const evidenceCount = status0.restarts?.evidence.length ?? 0;
    const killedAt = Date.now();
    await host.killSshd();
    const degraded = await cluster.waitFor((s) => s.health === "Degraded", 10_000);
    expect(Date.now() - killedAt).toBeLessThan(6_000);
    const condition = degraded.conditions.find((c) => c.reason === "NodeUnobservable");
    expect(condition?.status).toBe("Unknown");
    expect(condition?.message).toContain("node n3");
    expect(conditionOf(degraded, "Ready")?.status).toBe("True");
    // The cards of what runs there say it cannot be known now, not the last look's "alive".
    const cut = degraded.stages.filter((c) => c.node === "n3");
    expect(cut.length).toBeGreaterThan(0);
    expect(cut.map((c) => `${c.alive} ${c.liveness}`)).toEqual(cut.map(() => "false unknown"));
    expect(degraded.stages.filter((c) => c.node !== "n3").every((c) => c.liveness === "alive")).toBe(true);
    // `shardctl reconcile` lifts stalls, nothing else: the status its pass writes stays Degraded,
    // and the pass's own probes do not restart the node's condition: it still says since when.
    const askedAt = Date.now();
    expect((await runShardctl(cluster.world, ["reconcile", name])).code).toBe(0);
    // The pass is read from the daemon's log (every pass has its line there, a repeat at debug
    // level): the status's history folds a pass that repeats the last one.
    await untilHeld(
      async () =>
        (await readFile(join(cluster.world.root, "daemon.log"), "utf8")).split("\n").some((line) => {
          const entry = /^\{/.test(line) ? (JSON.parse(line) as { cluster?: string; time?: number; durationMs?: number }) : {};
          return entry.cluster === name && (entry.time ?? 0) > askedAt && typeof entry.durationMs === "number";
        }),
      15_000,
      "a pass after the reconcile request",
    );
    const passed = await cluster.status();
    expect(passed.health).toBe("Degraded");
    expect(passed.conditions.find((c) => c.reason === "NodeUnobservable")?.lastTransitionTime).toBe(condition?.lastTransitionTime);
    // Still serving, for longer than any death would take to be judged.
    await sleep(4_000);
    const url = `http://127.0.0.1:${new URL(degraded.coordinator!.url).port}`;
    expect(await chat(url, cluster.world.modelDir)).toBeTypeOf("string");
    expect((await enginePids()).all).toEqual(before.all);
    expect((await cluster.status()).restarts?.evidence.length ?? 0).toBe(evidenceCount);

    await host.startSshd();
    const healthy = await cluster.waitFor((s) => s.health === "Healthy", 15_000);
    expect(conditionOf(healthy, "StagesListening")?.status).toBe("True");
    expect((await enginePids()).all).toEqual(before.all);
    // Healthy only with every card alive again (not the cards of the pass that could not ask n3),
    // and the blink moved no card's `since`: no process restarted.
    expect(healthy.stages.map((c) => `${c.index} ${c.liveness}`)).toEqual(status0.stages.map((c) => `${c.index} alive`));
    expect(healthy.stages.map((c) => `${c.pid} ${c.since}`)).toEqual(status0.stages.map((c) => `${c.pid} ${c.since}`));
  }, 60_000);

  it("a stage engine stopped with SIGSTOP: coordinator /health stops answering 200, and the cluster is torn down within the heartbeat bound", async () => {
    const status = await cluster.status();
    const stage = status.stages.find((c) => c.node === "n1")!;
    const engine = await enginePidOf(stage.pid!);
    const url = status.coordinator!.url;
    const stoppedAt = Date.now();
    process.kill(engine, "SIGSTOP");
    try {
      // The engine's in-band heartbeats make the coordinator's /health answer 503 within ~3 s of a
      // silent peer; two such answers a second apart end the cluster.
      const unhealthyAt = await until(
        async () => (await fetch(`${url}/health`, { signal: AbortSignal.timeout(1_000) })).status !== 200,
        8_000,
        "coordinator /health not 200 after a stage's SIGSTOP",
      );
      const notReadyAt = await until(async () => conditionOf(await cluster.status(), "Ready")?.status === "False", 6_000, "Ready=False");
      expect(notReadyAt - unhealthyAt).toBeLessThan(3_500);
      expect(notReadyAt - stoppedAt).toBeLessThan(8_000);
      // The coordinator either answers 503 naming the dead link (judged after two answers) or gives up and exits.
      expect((await cluster.status()).restarts!.evidence.at(-1)!.reason).toMatch(/^(CoordinatorUnhealthy|CoordinatorDied|StageDied)$/);
    } finally {
      if (isRunning(engine)) process.kill(engine, "SIGCONT");
    }
    // The stopped engine is stopped for real by the teardown (TERM is followed by CONT), and the cluster comes back.
    await until(async () => !isRunning(engine), 15_000, "the stopped engine stopped");
    await cluster.waitFor((s) => isReadyAt(s, cluster.revision) && s.health === "Healthy", 60_000);
  }, 90_000);
});

function isRunning(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}
