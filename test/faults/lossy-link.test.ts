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
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import type { Daemon } from "../../src/reconciler/index.js";
import {
  chat,
  conditionOf,
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  readStatusFile,
  revisionOf,
  sleep,
  waitForStatus,
  writeDefinition,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { droppedPackets, shapeLink, shapedBytes } from "./support/link-shaping.js";
import { closeLabWorld, startLabWorld } from "./support/lab-world.js";
import type { Lab } from "./support/netns.js";
import { enginePids, ledgerNames, routerBackends } from "./support/world-checks.js";

let lab: Lab;
let world: DaemonWorld;
let daemon: Daemon;
let revision: string;
const name = "lossy";

beforeAll(async () => {
  ({ lab, world, daemon } = await startLabWorld(2, { layers: 4, restartBudget: 10 }));
  const port = await freePort();
  const portRange = await freePortRange(["127.0.0.1"]);
  await writeDefinition(world, name, definitionText(world, { nodes: ["n1", "n2"], port, portRange, register: true }));
  revision = await revisionOf(world, name);
  await waitForStatus(world, name, (s) => isReadyAt(s, revision) && s.health === "Healthy" && s.stages.every((c) => c.alive), 60_000);
}, 120_000);

afterAll(async () => {
  const left = await closeLabWorld({ lab, world, daemon }, name, { pruneMs: 20000 });
  expect(left.engines).toEqual([]);
  expect(left.ledger).toEqual([]);
}, 60_000);

describe("a lossy, rate-limited link to a stage host", () => {
  it("an idle cluster over 20 s: no death, never Degraded, still registered, and a completion through the link answers; the same after it heals", async () => {
    const host = lab.hosts[0]!;
    const before = await enginePids(world);
    const status0 = (await readStatusFile(world, name))!;
    const evidence0 = status0.restarts?.evidence.length ?? 0;
    const launches0 = status0.restarts?.count ?? 0;
    const url = `http://127.0.0.1:${new URL(status0.coordinator!.url).port}`;
    expect(await routerBackends(world)).toContain(status0.coordinator!.url);

    await host.loss(0.05);
    const unshape = await shapeLink(host, { rateKbit: 2_000, burstBytes: 16_000, latencyMs: 400 });
    const seen = new Map<string, number>();
    try {
      // 20 s of an idle cluster over the bad link, the status read every 250 ms.
      const end = Date.now() + 20_000;
      while (Date.now() < end) {
        const s = (await readStatusFile(world, name))!;
        const key = `${s.health} Ready=${conditionOf(s, "Ready")?.status}`;
        seen.set(key, (seen.get(key) ?? 0) + 1);
        await sleep(250);
      }
      expect([...seen.keys()]).toEqual(["Healthy Ready=True"]);
      const during = (await readStatusFile(world, name))!;
      expect(isReadyAt(during, revision)).toBe(true);
      expect(during.restarts?.evidence.length ?? 0).toBe(evidence0);
      expect(during.restarts?.count ?? 0).toBe(launches0);
      expect(during.conditions.filter((c) => c.reason === "NodeUnobservable")).toEqual([]);
      expect(await enginePids(world)).toEqual(before);
      expect(await routerBackends(world)).toContain(status0.coordinator!.url);
      // A completion crosses the lossy link (the coordinator's activations go to and from n1's stage).
      expect(await chat(url, world.modelDir)).toBeTypeOf("string");
      // The fault was real: packets were dropped, and the traffic went through the rate limit.
      expect(await droppedPackets(host)).toBeGreaterThan(0);
      expect(await shapedBytes(host)).toBeGreaterThan(0);
    } finally {
      await unshape();
      await host.heal();
    }
    // Healed: the same processes, still Healthy and registered, one ledger entry.
    await sleep(2_000);
    const after = (await readStatusFile(world, name))!;
    expect(after.health).toBe("Healthy");
    expect(isReadyAt(after, revision)).toBe(true);
    expect(after.restarts?.evidence.length ?? 0).toBe(evidence0);
    expect(await enginePids(world)).toEqual(before);
    expect(await chat(url, world.modelDir)).toBeTypeOf("string");
    expect(await routerBackends(world)).toContain(status0.coordinator!.url);
    expect(await ledgerNames(world)).toEqual([name]);
    expect((await new Ledger(world.stateDir).read(name))!.phase).toBe("running");
  }, 50_000);
});
