/**
 * The coordinator's link to stage-0 cut while the cluster serves, and nothing else: on the lab of
 * network namespaces (test/faults/support/netns.ts) the daemon, the embedded router and the
 * coordinator run in the root namespace, stage-0 on n1, stage-1 on n2. The cut is iptables DROP in
 * n1's namespace of exactly one TCP flow, both ways (no FIN, no RST): the coordinator's connection
 * to stage-0's transport port, by its four-tuple. stage-0↔stage-1, the coordinator↔stage-1, the
 * daemon's SSH to both hosts and its probes of stage-0's port (fresh connections, other source
 * ports) all keep working; a fresh connection to the port is made after each cut to show it.
 *
 * Neither end stopped answering: each still answers the third member. The end that goes deaf first
 * reaches its liveness bound (transport/liveness.ts) first and names the other silent. When that is
 * the coordinator, its exit ends stage-1's pipeline and stage-1's stage-0's, and stage-0 never
 * says the coordinator went silent: only stage-1, which still heard stage-0 as its pipeline broke
 * ("peer answering", src/engine/exit-status.ts), keeps the daemon's record of the death
 * (src/reconciler/record-death.ts) from naming stage-0 as "the member that stopped answering".
 * When stage-0 goes deaf first, the mirror: stage-1 still heard the coordinator. Which end goes deaf
 * first depends on the heartbeats' phase at a cut of both directions at once, so that is done once,
 * and then each order is forced: one direction dropped `staggerMs` before the other.
 *
 * Shown, each time: Ready=True and a completion before; Ready=False within the liveness bound plus
 * the daemon's detection; the only "peer silent" reports are between the coordinator and stage-0
 * (the cut flow, nothing else); no status written from the cut until the cluster is back names a
 * silent member (Ready, Reconciling, lastError, the restart evidence, the timeline); after the heal,
 * Ready=True with one engine set and a completion.
 */
import { execFile } from "node:child_process";
import { connect } from "node:net";
import { promisify } from "node:util";
import { expect, it } from "vitest";
import { chat, conditionOf, sleep } from "../reconciler/daemon-fixture.js";
import { expectBackWhole, expectCutDeath, holdAfterNotReadyMs } from "./support/cut-checks.js";
import { enginesPerPlace, watchDeathWords } from "./support/death-words.js";
import { useLabCluster } from "./support/lab-cluster.js";
import type { LabHost } from "./support/netns.js";

const run = promisify(execFile);
const name = "coordcut";

/**
 * The cuts, in order: both directions at once (the heartbeats' phase decides which end reports),
 * then stage-0's packets to the coordinator first (the coordinator goes deaf first, stage-0 never
 * reports), then the coordinator's packets to stage-0 first (stage-0 goes deaf first and reports).
 */
const cuts = ["both at once", "stage-0 to coordinator first", "coordinator to stage-0 first"] as const;
type CutOrder = (typeof cuts)[number];

/**
 * How long the second direction is dropped after the first, ms. The end deaf from the first rule
 * declares the other dead 1900–2600 ms after it (support/cut-checks.ts), the other end 3100–3800 ms after it: at
 * least 500 ms later, more than the coordinator's exit delay (--broken-exit-delay-ms 200, the
 * fixture's) and the closes that follow it over the intact links, so the pipeline's collapse after
 * the first end's report always reaches the other end before its own bound does.
 */
const staggerMs = 1_200;
let cut: FlowCut | undefined;
// Four layers over two stages; the daemon runs at the production health timings. Every cut costs
// a launch of the restart budget.
const cluster = useLabCluster(name, { hosts: 2, layers: 4, restartBudget: cuts.length + 5, define: {}, beforeClose: async () => cut?.heal() });

/** The coordinator's TCP connection to a stage, seen from the stage's host: the coordinator's address and source port, the stage's port. */
interface Flow {
  peer: string;
  peerPort: number;
  port: number;
}

/** stage-0's transport port, from the ledger. */
async function stage0Port(host: LabHost): Promise<number> {
  const entry = await cluster.ledger();
  const port = entry?.ports.find((p) => p.node === host.name && p.purpose === "transport")?.port;
  if (port === undefined) throw new Error(`no transport port of ${host.name} in the ledger: ${JSON.stringify(entry?.ports)}`);
  return port;
}

/** Established connections to `port` in `host`'s namespace from `peer`, as "peer port" numbers. */
async function peerPortsOf(host: LabHost, port: number, peer: string): Promise<number[]> {
  const { stdout } = await run("ip", ["netns", "exec", host.netns, "ss", "-Htn", "state", "established", `( sport = :${port} )`]);
  return stdout
    .split("\n")
    .map((line) => line.trim().split(/\s+/).at(-1) ?? "")
    .map((remote) => /^(?:::ffff:)?([\d.]+):(\d+)$/.exec(remote))
    .filter((m): m is RegExpExecArray => m !== null && m[1] === peer)
    .map((m) => Number(m[2]));
}

/**
 * The coordinator's connection to stage-0: of the connections to stage-0's port from the root
 * namespace's address, the one still there over five looks 100 ms apart (the daemon's readiness
 * probes connect and close at once; stage-1 does not dial stage-0, stage-0 dials it).
 */
async function coordinatorFlow(host: LabHost): Promise<Flow> {
  const port = await stage0Port(host);
  let stable: number[] | undefined;
  for (let look = 0; look < 5; look++) {
    const seen = await peerPortsOf(host, port, cluster.lab.gateway);
    stable = stable === undefined ? seen : stable.filter((p) => seen.includes(p));
    await sleep(100);
  }
  if (stable?.length !== 1)
    throw new Error(`expected one long-lived connection from ${cluster.lab.gateway} to ${host.address}:${port}, found source ports ${JSON.stringify(stable)}`);
  return { peer: cluster.lab.gateway, peerPort: stable[0]!, port };
}

interface FlowCut {
  heal(): Promise<void>;
}

/**
 * Drop every packet of `flow` in `host`'s namespace (both directions, by the four-tuple), in the
 * order `order` says; every other connection, to the same port or between the same hosts, is left alone.
 */
async function cutFlow(host: LabHost, flow: Flow, order: CutOrder): Promise<void> {
  const toStage = ["INPUT", "-p", "tcp", "-s", flow.peer, "--sport", String(flow.peerPort), "-d", host.address, "--dport", String(flow.port), "-j", "DROP"];
  const toCoordinator = ["OUTPUT", "-p", "tcp", "-s", host.address, "--sport", String(flow.port), "-d", flow.peer, "--dport", String(flow.peerPort), "-j", "DROP"];
  const rules = order === "coordinator to stage-0 first" ? [toStage, toCoordinator] : [toCoordinator, toStage];
  const inserted: string[][] = [];
  const iptables = (args: string[]) => run("ip", ["netns", "exec", host.netns, "iptables", "-w", ...args]);
  let healed = false;
  // Known before the first rule, so that a failure midway is healed too (cutOnce's finally, afterAll).
  cut = {
    heal: async () => {
      if (healed) return;
      healed = true;
      for (const rule of inserted) await iptables(["-D", ...rule]);
    },
  };
  for (const [i, rule] of rules.entries()) {
    if (i > 0 && order !== "both at once") await sleep(staggerMs);
    await iptables(["-I", ...rule]);
    inserted.push(rule);
  }
}

/** A fresh TCP connection from this (the root) namespace to `host`:`port`, as the daemon's readiness probe makes: did it connect within 1 s? */
function connects(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const timer = setTimeout(() => (socket.destroy(), resolve(false)), 1_000);
    socket.once("connect", () => (clearTimeout(timer), socket.destroy(), resolve(true)));
    socket.once("error", () => (clearTimeout(timer), resolve(false)));
  });
}

/** Cut the coordinator↔stage-0 flow, check the cluster down and its words, heal, check it back. */
async function cutOnce(round: number, order: CutOrder): Promise<void> {
  const n1 = cluster.lab.hosts[0]!;
  const before = await cluster.status();
  expect(conditionOf(before, "Ready")?.status, `cut ${round}: Ready before the cut`).toBe("True");
  expect(await chat(before.coordinator!.url, cluster.world.modelDir)).toBeTypeOf("string");
  expect(await enginesPerPlace(cluster.world, cluster.lab)).toEqual([1, 1, 1]);
  const deathsBefore = before.restarts?.evidence.length ?? 0;
  const flow = await coordinatorFlow(n1);

  const cutAt = Date.now();
  const watcher = await watchDeathWords(cluster.world, name, cutAt);
  const timings: Record<string, number> = {};
  let death: string | undefined;
  try {
    await cutFlow(n1, flow, order);
    timings.cutDone = Date.now() - cutAt;
    expect(await connects(n1.address, flow.port), `cut ${round}: a fresh connection to stage-0's port (${n1.address}:${flow.port}) still connects`).toBe(true);
    expect(await peerPortsOf(n1, flow.port, flow.peer), `cut ${round}: the coordinator's connection is still established on n1 (cut silently, not closed)`).toContain(
      flow.peerPort,
    );
    const found = await expectCutDeath(cluster.world, name, round, cutAt, deathsBefore);
    death = found.death;
    timings.notReady = found.notReady;
    timings.detection = found.detection;
    // The daemon's own probes of the stages' ports kept connecting: the death is an exit, not a closed port.
    expect(death, `cut ${round}: the death as the daemon found it`).not.toBe("StagePortClosed");
    // The relaunch does not wait for the heal: its coordinator dials from another source port.
    await sleep(holdAfterNotReadyMs);
  } finally {
    timings.healedAfter = Date.now() - cutAt;
    await cut?.heal();
  }

  const healedAt = Date.now();
  const ready = await cluster.waitForReady(60_000);
  timings.readyAfterHeal = Date.now() - healedAt;
  const { namings, readyLines, lastWords, silentReports } = await watcher.stop();
  console.log(
    `coordinator↔stage-0 cut ${round} (${order}): ${death ?? "no death recorded"}, timings ms ${JSON.stringify(timings)}\n  Ready as written:\n    ${readyLines.join("\n    ")}\n  the members' words:\n    ${lastWords.join("\n    ")}`,
  );
  const reports = silentReports.map((r) => `${r.reporter} → ${r.peer}`);
  expect(reports.length, `cut ${round}: a member reported the cut flow's other end silent`).toBeGreaterThan(0);
  for (const report of reports) expect(["coordinator → stage-0", "stage-0 → coordinator"], `cut ${round}: only the cut flow went silent`).toContain(report);
  if (order === "stage-0 to coordinator first") expect(reports, `cut ${round}: the coordinator went deaf first`).toContain("coordinator → stage-0");
  if (order === "coordinator to stage-0 first") expect(reports, `cut ${round}: stage-0 went deaf first`).toContain("stage-0 → coordinator");
  await expectBackWhole(cluster.world, cluster.lab, round, ready, namings, "the coordinator's link to stage-0");
}

it(`the coordinator's link to stage-0 cut ${cuts.length} times, alone: Ready=False within the liveness bound, no member named as the one that stopped answering, one engine set after each heal`, async () => {
  for (const [i, order] of cuts.entries()) await cutOnce(i + 1, order);
  expect(cluster.world.audit.problems).toEqual([]);
}, 120_000);
