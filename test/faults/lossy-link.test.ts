/**
 * A lossy, slow link between the control host (the daemon and the coordinator, root namespace) and a
 * stage host (its own network namespace with a real sshd, test/faults/support/netns.ts): 5 % of the
 * packets dropped at random each way (iptables `statistic`) and the link rate-limited to 2 Mbit/s
 * each way (tbf). This kernel has no sch_netem, so no fixed delay is added: only the queueing delay
 * the rate limit imposes on bursts. Lost packets alone are not a death: a probe retries its connects
 * within its 1 s deadline and SSH rides on TCP retransmits, so an idle cluster over 20 s keeps every
 * process, never reports Degraded, stays registered, and a completion through the link answers.
 * The daemon runs with the production health timings.
 */
import { describe, expect, it } from "vitest";
import { chat, conditionOf, isReadyAt, sleep } from "../reconciler/daemon-fixture.js";
import { droppedPackets, shapeLink, shapedBytes } from "./support/link-shaping.js";
import { useLabCluster } from "./support/lab-cluster.js";
import { enginePids, ledgerNames, routerBackends } from "./support/world-checks.js";

const name = "lossy";
const cluster = useLabCluster(name, { hosts: 2, layers: 4, restartBudget: 10, define: {}, pruneMs: 20_000 });

describe("a lossy, rate-limited link to a stage host", () => {
  it("an idle cluster over 20 s: no death, never Degraded, still registered, and a completion through the link answers; the same after it heals", async () => {
    const host = cluster.lab.hosts[0]!;
    const before = await enginePids(cluster.world);
    const status0 = await cluster.status();
    const evidence0 = status0.restarts?.evidence.length ?? 0;
    const launches0 = status0.restarts?.count ?? 0;
    const url = `http://127.0.0.1:${new URL(status0.coordinator!.url).port}`;
    expect(await routerBackends(cluster.world)).toContain(status0.coordinator!.url);

    await host.loss(0.05);
    const unshape = await shapeLink(host, { rateKbit: 2_000, burstBytes: 16_000, latencyMs: 400 });
    const seen = new Map<string, number>();
    try {
      // 20 s of an idle cluster over the bad link, the status read every 250 ms.
      const end = Date.now() + 20_000;
      while (Date.now() < end) {
        const s = await cluster.status();
        const key = `${s.health} Ready=${conditionOf(s, "Ready")?.status}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
        await sleep(250);
      }
      expect([...seen.keys()]).toEqual(["Healthy Ready=True"]);
      const during = await cluster.status();
      expect(isReadyAt(during, cluster.revision)).toBe(true);
      expect(during.restarts?.evidence.length ?? 0).toBe(evidence0);
      expect(during.restarts?.count ?? 0).toBe(launches0);
      expect(during.conditions.filter((c) => c.reason === "NodeUnobservable")).toEqual([]);
      expect(await enginePids(cluster.world)).toEqual(before);
      expect(await routerBackends(cluster.world)).toContain(status0.coordinator!.url);
      // A completion crosses the lossy link (the coordinator's activations go to and from n1's stage).
      expect(await chat(url, cluster.world.modelDir)).toBeTypeOf("string");
      // The fault was real: packets were dropped, and the traffic went through the rate limit.
      expect(await droppedPackets(host)).toBeGreaterThan(0);
      expect(await shapedBytes(host)).toBeGreaterThan(0);
    } finally {
      await unshape();
      await host.heal();
    }
    // Healed: the same processes, still Healthy and registered, one ledger entry.
    await sleep(2_000);
    const after = await cluster.status();
    expect(after.health).toBe("Healthy");
    expect(isReadyAt(after, cluster.revision)).toBe(true);
    expect(after.restarts?.evidence.length ?? 0).toBe(evidence0);
    expect(await enginePids(cluster.world)).toEqual(before);
    expect(await chat(url, cluster.world.modelDir)).toBeTypeOf("string");
    expect(await routerBackends(cluster.world)).toContain(status0.coordinator!.url);
    expect(await ledgerNames(cluster.world)).toEqual([name]);
    expect((await cluster.ledger())!.phase).toBe("running");
  }, 50_000);
});
