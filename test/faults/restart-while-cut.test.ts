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
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { Ledger } from "../../src/launch/index.js";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import {
  chat,
  conditionOf,
  definitionText,
  freePort,
  freePortRange,
  isReadyAt,
  removeDefinition,
  revisionOf,
  sleep,
  spawnDaemon,
  startWorld,
  waitForStatus,
  waitWatching,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
  type SpawnedDaemon,
} from "../reconciler/daemon-fixture.js";
import { enginesPerPlace } from "./support/death-words.js";
import { startLab, type Lab } from "./support/netns.js";
import { enginePids, killPids, routerBackends, until } from "./support/world-checks.js";

const name = "restartcut";
let lab: Lab;
let world: DaemonWorld;
let revision: string;
const daemons: SpawnedDaemon[] = [];

async function startDaemon(): Promise<SpawnedDaemon> {
  const daemon = await spawnDaemon(world);
  daemons.push(daemon);
  await waitWatching(daemon, 30_000);
  return daemon;
}

beforeAll(async () => {
  lab = await startLab(2);
  world = await startWorld({ layers: 4 });
  world.sshd = lab.sshd;
  for (const [i, node] of lab.sshd.nodes.entries()) world.hosts.set(`n${i + 1}`, node.host);
  await writeSettings(world, { router: true, restartBudget: 4 });
  await startDaemon();
  const extraArgs = ["--connect-timeout-ms", "5000", "--broken-exit-delay-ms", "60000"];
  const text = definitionText(world, { nodes: ["n1", "n2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]), register: true, extraArgs });
  await writeDefinition(world, name, text);
  revision = await revisionOf(world, name);
  await waitForReady(60_000);
}, 120_000);

afterAll(async () => {
  await lab?.hosts[1]?.heal().catch(() => undefined);
  if (world !== undefined) await removeDefinition(world, name, 30_000).catch(() => undefined);
  for (const d of daemons) if (d.child.exitCode === null && d.child.signalCode === null) d.child.kill("SIGKILL");
  const left = world === undefined ? [] : await enginePids(world);
  await lab?.close();
  killPids(left);
  await world?.close();
  expect(left).toEqual([]);
}, 60_000);

function waitForReady(timeoutMs: number): Promise<ClusterStatus> {
  return waitForStatus(world, name, (s) => isReadyAt(s, revision) && s.health === "Healthy" && s.stages.every((c) => c.alive), timeoutMs);
}

/** A live process (a zombie does not count), from /proc/<pid>/stat. */
function isRunning(pid: number): boolean {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return false;
  }
}

/** Ready as written while `watching()`: each status file that differs from `before`, with the time it was read. */
function recordReady(before: string, watching: () => boolean): { writes: Array<{ at: number; ready: string }>; done: Promise<void> } {
  const writes: Array<{ at: number; ready: string }> = [];
  const file = join(world.clustersDir, `${name}.status.json`);
  const done = (async () => {
    let last = before;
    while (watching()) {
      const text = await readFile(file, "utf8").catch(() => "");
      if (text !== "" && text !== last) {
        last = text;
        const ready = conditionOf(JSON.parse(text) as ClusterStatus, "Ready");
        writes.push({ at: Date.now(), ready: `Ready=${ready?.status} ${ready?.reason}: ${ready?.message ?? ""}` });
      }
      await sleep(20);
    }
  })();
  return { writes, done };
}

it("a daemon restarted while a stage host is cut off watches what runs without a plan: the broken cluster deregistered and its reachable part stopped before the heal", async () => {
  const n2 = lab.hosts[1]!;
  const before = (await new Ledger(world.stateDir).read(name))!;
  const coordinator = before.processes.find((p) => p.role === "coordinator")!;
  const oldPids = await enginePids(world);
  expect(await routerBackends(world)).toContain("url:");

  const serving = await readFile(join(world.clustersDir, `${name}.status.json`), "utf8");
  const cutAt = Date.now();
  let cutOff = true;
  const recording = recordReady(serving, () => cutOff);
  const timings: Record<string, number> = {};
  try {
    await n2.partition();
    const first = daemons.at(-1)!;
    first.child.kill("SIGKILL");
    await first.exited;
    await startDaemon();
    timings.restarted = Date.now() - cutAt;
    // The new daemon's planning waits out n2's SSH handshake (4 s) before it gives up on the plan.
    timings.deregistered = (await until(async () => !(await routerBackends(world)).includes("url:"), 20_000, "the router's backend removed", 50)) - cutAt;
    timings.coordinatorStopped = (await until(async () => !isRunning(coordinator.pid), 10_000, "the coordinator (reachable, answering 503) stopped", 50)) - cutAt;
    // The teardown ends once n2's questions time out (2 s): only what runs there is left, in the ledger.
    const ledger = new Ledger(world.stateDir);
    await until(async () => (await ledger.read(name))?.processes.every((p) => p.node === "n2") === true, 10_000, "only n2's stage left in the ledger", 50);
    expect((await ledger.read(name))?.phase).toBe("tearing-down");
    await sleep(1_000);
  } finally {
    await n2.heal();
    timings.healed = Date.now() - cutAt;
    cutOff = false;
    await recording.done;
  }
  const ready = await waitForReady(60_000);
  timings.readyAfterHeal = Date.now() - cutAt - timings.healed;
  console.log(
    `restart while cut: timings ms ${JSON.stringify(timings)}\n  Ready as written while cut off:\n    ${recording.writes.map((w) => `+${w.at - cutAt} ms ${w.ready}`).join("\n    ")}`,
  );

  expect(recording.writes.filter((w) => w.ready.startsWith("Ready=True")).map((w) => `+${w.at - cutAt} ms ${w.ready}`)).toEqual([]);
  const after = await enginePids(world);
  expect(
    after.filter((pid) => oldPids.includes(pid)),
    "none of the old processes left",
  ).toEqual([]);
  expect(await enginesPerPlace(world, lab), "one engine set after the heal (n1, n2, the root namespace)").toEqual([1, 1, 1]);
  expect(await routerBackends(world)).toContain("url:");
  expect(await chat(ready.coordinator!.url, world.modelDir)).toBeTypeOf("string");
  expect(world.audit.problems).toEqual([]);
}, 90_000);

it("a daemon restarted while a stage host's sshd is down (the pipeline serving) adopts what serves: Ready=True and Degraded naming the node, never Ready=False", async () => {
  const n2 = lab.hosts[1]!;
  const pids = await enginePids(world);
  const serving = await readFile(join(world.clustersDir, `${name}.status.json`), "utf8");
  const url = (JSON.parse(serving) as ClusterStatus).coordinator!.url;
  let watching = true;
  const recording = recordReady(serving, () => watching);
  const lostAt = Date.now();
  let degraded: ClusterStatus;
  try {
    await n2.killSshd();
    const first = daemons.at(-1)!;
    first.child.kill("SIGKILL");
    await first.exited;
    await startDaemon();
    // Planning gives up on n2 (its SSH refused); what serves is adopted and watched, n2 said unobservable.
    degraded = await waitForStatus(world, name, (s) => s.health === "Degraded" && s.conditions.some((c) => c.reason === "NodeUnobservable"), 30_000);
    expect(await chat(url, world.modelDir)).toBeTypeOf("string");
  } finally {
    await n2.startSshd();
  }
  await waitForReady(30_000);
  watching = false;
  await recording.done;
  console.log(
    `restart while sshd is down: Degraded after ${Date.now() - lostAt} ms\n  Ready as written:\n    ${recording.writes.map((w) => `+${w.at - lostAt} ms ${w.ready}`).join("\n    ")}`,
  );
  expect(conditionOf(degraded, "Ready")?.status).toBe("True");
  expect(conditionOf(degraded, "StagesListening")?.message).toContain("node n2");
  expect(recording.writes.filter((w) => !w.ready.startsWith("Ready=True")).map((w) => `+${w.at - lostAt} ms ${w.ready}`)).toEqual([]);
  // The same processes throughout: adopted, never relaunched.
  expect(await enginePids(world)).toEqual(pids);
  expect(world.audit.problems).toEqual([]);
}, 90_000);
