/**
 * The daemon's own network lost while its cluster's is not, on a lab of network namespaces
 * (test/faults/support/netns.ts): stage hosts n1, n2 and the coordinator's host n3, each in its own
 * namespace; the daemon alone in the root namespace. Every host drops every packet to and from the
 * root namespace's bridge address (a laptop running the daemon off its Wi-Fi), while the hosts still
 * reach each other and a client on one of them is served throughout.
 *
 * The daemon then hears nothing from any node nor from the coordinator — exactly what it would hear
 * if the coordinator's node alone were cut off. It once took that for a death: the cluster torn
 * down at the heal, a launch of the restart budget spent on each blip (and Stalled for good after
 * three), while it never stopped serving. Now silence is no death while no node of the cluster
 * answers: the status says Ready Unknown (DaemonCutOff), nothing is torn down or counted, and the
 * cluster is found running at the heal. Past the grace (8 s here, 5 minutes by default) silence is
 * judged as a death after all, naming how long no node answered. A daemon started while it is cut
 * off (a laptop restarted before its network is up) says the same of the launch it finds in its
 * ledger, and adopts it at the heal. The daemon is a real `shardctl daemon` process.
 */
import { execFile } from "node:child_process";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { conditionOf } from "../reconciler/daemon-fixture.js";
import { useLabCluster } from "./support/lab-cluster.js";
import { recordStatusWrites } from "./support/world-checks.js";

const run = promisify(execFile);
const name = "cutoff";
const graceMs = 8_000;
let cut = false;
// Production health timings (poll 1000 ms, probe deadline 1000 ms, 2 strikes), a short grace
// (`[daemon] cut_off_grace_seconds`).
const cluster = useLabCluster(name, { hosts: 3, layers: 4, restartBudget: 3, cutOffGraceSeconds: graceMs / 1000, daemon: "spawned", beforeClose: async () => heal() });

async function cutDaemonOff(): Promise<void> {
  for (const host of cluster.lab.hosts) await host.cutFromGateway();
  cut = true;
}
async function heal(): Promise<void> {
  if (!cut) return;
  for (const host of cluster.lab.hosts) await host.heal();
  cut = false;
}

/** A completion asked from n1's namespace (a client on the nodes' side), through the coordinator on n3: its HTTP status. */
async function askFromN1(url: string): Promise<number> {
  const script = `fetch(${JSON.stringify(`${url}/v1/completions`)}, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify({ prompt: "hi", max_tokens: 2, temperature: 0 }), signal: AbortSignal.timeout(10000) }).then((r) => console.log(r.status), () => console.log(0))`;
  const { stdout } = await run("ip", ["netns", "exec", cluster.lab.hosts[0]!.netns, process.execPath, "-e", script]);
  return Number(stdout.trim());
}

/** Whether every process the ledger records runs in its host's namespace. */
async function allRunning(): Promise<boolean> {
  const entry = (await cluster.ledger())!;
  const inNamespaces = new Set((await Promise.all(cluster.lab.hosts.map((h) => h.pids()))).flat());
  return entry.processes.every((p) => inNamespaces.has(p.pid));
}

it("cut off for less than the grace: nothing torn down or counted, Ready Unknown (DaemonCutOff) while it lasts, the same launch Ready after the heal, and clients on the nodes' side served throughout", async () => {
  const n3 = cluster.lab.hosts[2]!;
  const revision = await cluster.define({ coordinatorNode: "n3", coordinatorHost: n3.address, register: false });
  const ready = await cluster.waitForReady(60_000, revision);
  const launch = (await cluster.ledger())!.startedAt;
  const pids = (await cluster.ledger())!.processes.map((p) => p.pid);
  const url = ready.coordinator!.url;

  await cutDaemonOff();
  const cutAt = Date.now();
  const recording = recordStatusWrites(cluster.world, name, () => cut, { pollMs: 50 });
  try {
    const said = await cluster.waitFor((s) => conditionOf(s, "Ready")?.reason === "DaemonCutOff", graceMs - 1_000);
    console.log(`cut off said ${Date.now() - cutAt} ms after the cut: ${conditionOf(said, "Ready")!.message}`);
    expect(conditionOf(said, "Ready")!.status).toBe("Unknown");
    expect(conditionOf(said, "Ready")!.message).toContain("n1, n2, n3");
    expect(said.health).toBe("Degraded");
    expect(said.coordinator?.health).toBe("unknown");
    expect(await askFromN1(url)).toBe(200);
    expect(await allRunning()).toBe(true);
    // Held a while, short of the grace.
    while (Date.now() - cutAt < graceMs - 2_000) await new Promise((r) => setTimeout(r, 250));
  } finally {
    await heal();
    await recording.done;
  }
  // No version of the file said the cluster lost a process, nor spent a launch.
  const deaths = recording.writes.filter((w) => conditionOf(w.status, "Ready")?.status === "False");
  expect(deaths.map((w) => conditionOf(w.status, "Ready")!.message)).toEqual([]);
  const back = await cluster.waitForReady(30_000, revision);
  expect(back.restarts?.count).toBe(1);
  expect((await cluster.ledger())!.startedAt).toBe(launch);
  expect((await cluster.ledger())!.processes.map((p) => p.pid)).toEqual(pids);
  expect(await allRunning()).toBe(true);
}, 180_000);

it("cut off past the grace: judged by its silence after all, naming how long no node answered", async () => {
  const launch = (await cluster.ledger())!.startedAt;
  await cutDaemonOff();
  const cutAt = Date.now();
  const recording = recordStatusWrites(cluster.world, name, () => cut, { pollMs: 50 });
  try {
    const dead = await cluster.waitFor((s) => conditionOf(s, "Ready")?.status === "False", graceMs + 20_000);
    const ms = Date.now() - cutAt;
    const message = conditionOf(dead, "Ready")!.message;
    console.log(`judged ${ms} ms after the cut: ${message}`);
    expect(ms).toBeGreaterThanOrEqual(graceMs);
    expect(message).toMatch(/none of its nodes \(n1, n2, n3\) has answered the daemon for \d+ s/);
  } finally {
    await heal();
    await recording.done;
  }
  // Never Ready True while nothing answered: not when the grace ran out, before the death's record.
  const readies = recording.writes.map((w) => conditionOf(w.status, "Ready")?.reason);
  const saidAt = readies.indexOf("DaemonCutOff");
  const deathAt = recording.writes.findIndex((w) => conditionOf(w.status, "Ready")?.status === "False");
  expect(saidAt).toBeGreaterThanOrEqual(0);
  expect(deathAt).toBeGreaterThan(saidAt);
  // Said until the death replaces it: the grace running out is no answer.
  expect(new Set(readies.slice(saidAt, deathAt))).toEqual(new Set(["DaemonCutOff"]));
  const back = await cluster.waitForReady(60_000);
  expect((await cluster.ledger())!.startedAt).not.toBe(launch);
  expect(back.restarts?.count).toBe(2);
}, 180_000);

it("a daemon started while cut off (a laptop rebooted off its network): Ready Unknown (DaemonCutOff), nothing torn down or counted, the same launch Ready after the heal", async () => {
  const before = (await cluster.ledger())!;
  const count = (await cluster.status()).restarts?.count;
  await cutDaemonOff();
  const cutAt = Date.now();
  const recording = recordStatusWrites(cluster.world, name, () => cut, { pollMs: 50 });
  const written = (): string =>
    recording.writes
      .map(
        (w) =>
          `+${w.at - cutAt} ms ${w.status.health} Ready=${conditionOf(w.status, "Ready")?.status}/${conditionOf(w.status, "Ready")?.reason} ${w.status.lastError?.reason ?? ""}`,
      )
      .join("\n  ");
  try {
    const first = cluster.latestDaemon();
    first.child.kill("SIGKILL");
    await first.exited;
    await cluster.spawnDaemon();
    // Before the grace: the new daemon's own monitor has found the silence, not judged it.
    const said = await cluster.waitFor((s) => conditionOf(s, "Ready")?.reason === "DaemonCutOff", graceMs - 1_000);
    expect(conditionOf(said, "Ready")!.status).toBe("Unknown");
    expect(said.health).toBe("Degraded");
    expect(await allRunning()).toBe(true);
  } finally {
    await heal();
    await recording.done;
    console.log(`a daemon started while cut off, its status as written:\n  ${written()}`);
  }
  expect(recording.writes.filter((w) => conditionOf(w.status, "Ready")?.status === "False").map((w) => conditionOf(w.status, "Ready")!.message)).toEqual([]);
  const back = await cluster.waitForReady(30_000);
  expect(back.restarts?.count).toBe(count);
  expect((await cluster.ledger())!.startedAt).toBe(before.startedAt);
  expect(await allRunning()).toBe(true);
}, 180_000);
