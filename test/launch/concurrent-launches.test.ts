/**
 * Two clusters launched at the same moment from one process (a daemon starting beside several
 * definitions, one commit starting two) over the same transport port range: each chooses and
 * records its ports before the other chooses, so they take different ports and both serve. Before,
 * both saw the same ports free and took them: one's stage failed to bind, and its launch failed
 * blaming the network. Real processes on loopback SSH nodes (the lifecycle world).
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { launchCluster, teardownCluster, type LedgerEntry } from "../../src/launch/index.js";
import { makeContext, makeRequest, startLifecycleWorld, type LifecycleWorld } from "./lifecycle-fixture.js";

let world: LifecycleWorld;

beforeAll(async () => {
  world = await startLifecycleWorld();
});
afterAll(async () => {
  for (const entry of await world.ledger.list()) {
    await teardownCluster(entry, { ledger: world.ledger, registrar: world.registrar, nodeFor: world.nodeFor, graceMs: 2_000 });
  }
  await world?.close();
});

it("two launches at once over one port range take different ports, and both serve", async () => {
  const alpha = await makeRequest(world, { cluster: "alpha" });
  const beta = { ...(await makeRequest(world, { cluster: "beta" })), portRange: alpha.portRange };
  const results = await Promise.allSettled([launchCluster(alpha, makeContext(world)), launchCluster(beta, makeContext(world))]);
  expect(results.map((r) => (r.status === "fulfilled" ? "ready" : String(r.reason)))).toEqual(["ready", "ready"]);
  const entries = (await Promise.all(["alpha", "beta"].map((name) => world.ledger.read(name)))) as LedgerEntry[];
  const taken = entries.flatMap((entry) => entry.ports.map((p) => `${p.host}:${p.port}`));
  expect(new Set(taken).size).toBe(taken.length);
  for (const entry of entries) expect((await fetch(`${entry.coordinatorUrl!}/health`)).status).toBe(200);
}, 120_000);
