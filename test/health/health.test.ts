/**
 * src/health against real local processes and real sockets: observation cards and aggregate,
 * exit-watch deaths, polling fallback, strike counting, recycled pids.
 */
import { execFile } from "node:child_process";
import { EventEmitter } from "node:events";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer as createHttpServer, type Server as HttpServer } from "node:http";
import { createServer, type AddressInfo, type Server } from "node:net";
import { tmpdir } from "node:os";
import { setTimeout as sleep } from "node:timers/promises";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { monitorCluster, observeCluster, type DeathEvent, type WatchedCluster, type WatchedProcess } from "../../src/health/index.js";
import { LocalNode, type NodeAccess } from "../../src/nodes/index.js";
import { coordinatorStatusSchema, stageCardSchema } from "../../src/reconciler/status/schema.js";
import { allocateHost } from "../support/test-world.js";
import { refusingSshNode } from "../support/refusing-ssh-node.js";
import { ensureTool } from "../support/namespaces.js";
import { promisify } from "node:util";

const run = promisify(execFile);

let dir: string;
let node: NodeAccess;
/** The loopback address of this file's servers (leased: a port closed here stays closed). */
let host: string;
const started: WatchedProcess[] = [];
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-health-"));
  host = await allocateHost();
  node = new LocalNode({ name: "local", host: "local", modelDir: dir });
});
afterEach(async () => {
  for (const p of started.splice(0)) await node.signal(p.pid, "SIGKILL", p.startTime);
  for (const close of closers.splice(0)) await close();
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

async function startSleeper(role: "stage" | "coordinator", index?: number): Promise<WatchedProcess> {
  const { pid, startTime } = await node.startDetached(["sleep", "60"], { logFile: join(dir, `${role}${index ?? ""}.log`), cwd: dir });
  const process: WatchedProcess = { role, ...(index === undefined ? {} : { index }), node: "local", pid, startTime };
  started.push(process);
  return process;
}

async function listen(): Promise<Server & { port: number }> {
  const server = createServer((socket) => socket.destroy());
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  return Object.assign(server, { port: (server.address() as AddressInfo).port });
}

/**
 * A coordinator /health whose status the test sets: `status.code`, or the codes queued with
 * `queue(...)`, one per request, first. `served` lists every code answered, in order, and
 * `untilServed(n)` resolves once `n` requests have been answered (an event, not a timer).
 */
async function healthEndpoint(): Promise<{
  url: string;
  status: { code: number };
  server: HttpServer;
  queue: (...codes: number[]) => void;
  served: number[];
  untilServed: (count: number) => Promise<void>;
}> {
  const status = { code: 200 };
  const queued: number[] = [];
  const served: number[] = [];
  const answered = new EventEmitter();
  const server = createHttpServer((req, res) => {
    if (req.url !== "/health") return void res.writeHead(404).end();
    const code = queued.shift() ?? status.code;
    served.push(code);
    res.writeHead(code).end();
    answered.emit("served");
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(() => new Promise((resolve) => server.close(() => resolve())));
  const untilServed = (count: number): Promise<void> =>
    new Promise((resolve) => {
      const check = (): void => {
        if (served.length < count) return;
        answered.off("served", check);
        resolve();
      };
      answered.on("served", check);
      check();
    });
  return { url: `http://${host}:${(server.address() as AddressInfo).port}`, status, server, queue: (...codes) => queued.push(...codes), served, untilServed };
}

async function cluster(): Promise<{ entry: WatchedCluster; ports: Array<Server & { port: number }>; health: Awaited<ReturnType<typeof healthEndpoint>> }> {
  const stages = [await startSleeper("stage", 0), await startSleeper("stage", 1)];
  const coordinator = await startSleeper("coordinator");
  const ports = [await listen(), await listen()];
  const health = await healthEndpoint();
  const entry: WatchedCluster = {
    cluster: "c",
    processes: [...stages, coordinator],
    ports: [
      { node: "local", host, port: ports[0]!.port, purpose: "transport" },
      { node: "local", host, port: ports[1]!.port, purpose: "transport" },
      { node: "local", host, port: 1, purpose: "control" },
    ],
    coordinatorUrl: health.url,
  };
  return { entry, ports, health };
}

const nodeFor = (): NodeAccess => node;

/** An SSH node named "lost" whose port refuses: every question to it fails. */
function unreachableNode(): Promise<NodeAccess> {
  return refusingSshNode("lost", host, closers);
}

describe("observeCluster", () => {
  it("is Healthy with schema-valid cards, and keeps `since` while nothing changes", async () => {
    const { entry } = await cluster();
    const first = await observeCluster(entry, {
      nodeFor,
      layers: [
        [0, 3],
        [3, 5],
      ],
    });
    expect(first.health).toBe("Healthy");
    expect(first.problems).toEqual([]);
    expect(first.stages.map((s) => [s.index, s.layers, s.alive, s.transport])).toEqual([
      [0, [0, 3], true, "listening"],
      [1, [3, 5], true, "listening"],
    ]);
    for (const card of first.stages) stageCardSchema.parse(card);
    expect(coordinatorStatusSchema.parse(first.coordinator)).toMatchObject({ health: "ok", node: "local" });
    await new Promise((r) => setTimeout(r, 20));
    const second = await observeCluster(entry, { nodeFor, previous: first });
    expect(second.stages.map((s) => s.since)).toEqual(first.stages.map((s) => s.since));
  });

  it("is Unhealthy once a stage is gone or its port closed; Degraded while the coordinator loads", async () => {
    const { entry, ports, health } = await cluster();
    health.status.code = 503;
    expect((await observeCluster(entry, { nodeFor })).health).toBe("Degraded");
    health.status.code = 200;
    await new Promise<void>((resolve) => ports[1]!.close(() => resolve()));
    const closed = await observeCluster(entry, { nodeFor });
    expect(closed.health).toBe("Unhealthy");
    expect(closed.stages[1]).toMatchObject({ alive: true, transport: "closed" });
    const stage0 = entry.processes[0]!;
    await node.signal(stage0.pid, "SIGKILL", stage0.startTime);
    await node.watchExit(stage0.pid, stage0.startTime);
    const dead = await observeCluster(entry, { nodeFor });
    expect(dead.stages[0]).toMatchObject({ alive: false, pid: stage0.pid });
    expect(dead.problems.join("\n")).toMatch(/stage-0 \(pid \d+\) on local is gone/);
  });

  it("a pid whose start time does not match is not ours: gone", async () => {
    const { entry } = await cluster();
    const stale = { ...entry, processes: entry.processes.map((p, i) => (i === 0 ? { ...p, startTime: "linux:1" } : p)) };
    const observation = await observeCluster(stale, { nodeFor });
    expect(observation.health).toBe("Unhealthy");
    expect(observation.stages[0]!.alive).toBe(false);
  });

  it("a stage whose node cannot be asked: liveness unknown (alive false, not gone), Degraded", async () => {
    const { entry } = await cluster();
    const lost = await unreachableNode();
    const moved = { ...entry, processes: entry.processes.map((p, i) => (i === 0 ? { ...p, node: "lost" } : p)) };
    const observation = await observeCluster(moved, { nodeFor: (name) => (name === "lost" ? lost : node) });
    expect(observation.stages[0]).toMatchObject({ alive: false, liveness: "unknown" });
    expect(observation.stages[1]).toMatchObject({ alive: true, liveness: "alive" });
    expect(observation.gone).toEqual([]);
    expect(observation.health).toBe("Degraded");
    expect(stageCardSchema.parse(observation.stages[0])).toMatchObject({ liveness: "unknown" });
  });

  // Regression: after a death, while a loaded or cut node kept the teardown from finishing, the next
  // pass's look got no answer for the dead members and drew them back as "liveness unknown" (the
  // dashboard: Degraded cards, "its node does not answer") though the death had said they exited.
  it("a member seen gone before is gone, not asked: its node's silence does not draw it in doubt", async () => {
    const { entry } = await cluster();
    const lost = await unreachableNode();
    const moved = { ...entry, processes: entry.processes.map((p) => (p.role === "stage" || p.role === "coordinator" ? { ...p, node: "lost" } : p)) };
    const asked = performance.now();
    const observation = await observeCluster(moved, { nodeFor: (name) => (name === "lost" ? lost : node), knownGone: new Set(["stage-1", "coordinator"]) });
    expect(observation.stages[1]).toMatchObject({ alive: false, liveness: "gone" });
    // The one not seen gone is asked, and its node's silence is doubt, as before.
    expect(observation.stages[0]).toMatchObject({ alive: false, liveness: "unknown" });
    expect(observation.gone).toEqual(["stage-1", "coordinator"]);
    expect(observation.health).toBe("Unhealthy");
    expect(performance.now() - asked).toBeLessThan(10_000);
  });

  // Regression: a launch of an mlx-lm ring cut short (the daemon killed after it started stage-1 only)
  // was given rank 1 - 1 - 1 = -1, which the status schema refuses: no status file was written for a minute.
  it("a ring launch that recorded only its last stage: ranks count from the plan's stage count, never below 0", async () => {
    const { entry } = await cluster();
    const onlyLast = { ...entry, engine: "mlx-lm" as const, processes: entry.processes.filter((p) => p.role === "stage" && p.index === 1) };
    const unplanned = await observeCluster(onlyLast, { nodeFor });
    expect(unplanned.stages.map((s) => [s.index, s.rank])).toEqual([[1, 0]]);
    expect(stageCardSchema.parse(unplanned.stages[0])).toMatchObject({ rank: 0 });
    const planned = await observeCluster(onlyLast, {
      nodeFor,
      layers: [
        [0, 2],
        [2, 4],
        [4, 6],
      ],
    });
    expect(planned.stages.map((s) => [s.index, s.rank])).toEqual([[1, 1]]);
  });

  it("nothing recorded is Unhealthy", async () => {
    const observation = await observeCluster({ cluster: "empty", processes: [], ports: [] }, { nodeFor });
    expect(observation.health).toBe("Unhealthy");
    expect(observation.problems).toEqual(["no coordinator is recorded", "no stage is recorded"]);
  });
});

describe("monitorCluster", () => {
  it("learns a kill -9 from the exit watch, long before the next poll", async () => {
    const { entry } = await cluster();
    const deaths: DeathEvent[] = [];
    let resolve!: (e: DeathEvent) => void;
    const death = new Promise<DeathEvent>((r) => (resolve = r));
    const monitor = monitorCluster(entry, { nodeFor, pollIntervalMs: 60_000, onDeath: (e) => (deaths.push(e), resolve(e)) });
    closers.push(() => monitor.stop());
    await new Promise((r) => setTimeout(r, 100));
    const victim = entry.processes[1]!;
    const killedAt = Date.now();
    await node.run(["kill", "-9", String(victim.pid)]);
    const event = await death;
    // Far sooner than the 60 s poll: the exit watch reported it (a generous bound, the machine is shared).
    expect(Date.now() - killedAt).toBeLessThan(15_000);
    expect(event).toMatchObject({ cluster: "c", label: "stage-1", node: "local", reason: "StageDied" });
    // The members seen gone by then: what the stage cards say of them from now on, unasked.
    expect(event.gone).toEqual(["stage-1"]);
    await new Promise((r) => setTimeout(r, 200));
    expect(deaths).toHaveLength(1);
  });

  // What a death's record weighs the members' words by: a member on a node that missed a liveness
  // round just before is no witness (record-death.ts).
  it("a death names the nodes that missed a liveness round in the 10 s before it (flakyNodes)", async () => {
    const { entry } = await cluster();
    // Stage-0's node refuses every connection: its liveness rounds go unanswered.
    const lost = await unreachableNode();
    const moved = { ...entry, processes: entry.processes.map((p, i) => (i === 0 ? { ...p, node: "lost" } : p)) };
    let unobservable!: () => void;
    const missed = new Promise<void>((r) => (unobservable = r));
    let resolve!: (e: DeathEvent) => void;
    const death = new Promise<DeathEvent>((r) => (resolve = r));
    const monitor = monitorCluster(moved, {
      nodeFor: (name) => (name === "lost" ? lost : node),
      pollIntervalMs: 100,
      onUnobservable: () => unobservable(),
      onDeath: (e) => resolve(e),
    });
    closers.push(() => monitor.stop());
    await missed;
    await node.run(["kill", "-9", String(moved.processes[1]!.pid)]);
    expect(await death).toMatchObject({ label: "stage-1", node: "local", flakyNodes: ["lost"] });
  });

  it("falls back to polling without exit watches", async () => {
    const { entry } = await cluster();
    let resolve!: (e: DeathEvent) => void;
    const death = new Promise<DeathEvent>((r) => (resolve = r));
    const monitor = monitorCluster(entry, { nodeFor, exitWatch: false, pollIntervalMs: 50, onDeath: (e) => resolve(e) });
    closers.push(() => monitor.stop());
    const victim = entry.processes[2]!;
    await node.run(["kill", "-9", String(victim.pid)]);
    expect(await death).toMatchObject({ label: "coordinator", reason: "CoordinatorDied" });
  });

  it("counts strikes: a single bad /health is forgiven, three in a row are not", async () => {
    const { entry, health } = await cluster();
    const deaths: DeathEvent[] = [];
    let resolveDeath!: (e: DeathEvent) => void;
    const death = new Promise<DeathEvent>((r) => (resolveDeath = r));
    // Each poll asks /health exactly once and polls never overlap, so answer k+1 being served means
    // answer k has been counted. The script is per request, not per time window: no race with the poll.
    // One bad answer, good, two bad in a row, good: each streak stays under 3 only if the count
    // resets on success; with strikes = 1 the first 500 kills it, with strikes = 2 the second streak does.
    health.queue(500, 200, 500, 500, 200);
    const monitor = monitorCluster(entry, {
      nodeFor,
      pollIntervalMs: 40,
      strikes: 3,
      // A slow answer on a loaded machine must not turn a good answer into a strike.
      probeTimeoutMs: 10_000,
      onDeath: (e) => (deaths.push(e), resolveDeath(e)),
    });
    closers.push(() => monitor.stop());
    // Served: the 5 scripted answers and 2 good ones after them, so the script's last answer has been
    // judged — unless the monitor declares the coordinator dead first (it then polls no more).
    const forgiven = await Promise.race([death.then(() => "declared dead" as const), health.untilServed(7).then(() => "still watching" as const)]);
    expect(deaths).toEqual([]);
    expect(forgiven).toBe("still watching");
    expect(health.served.slice(0, 5)).toEqual([500, 200, 500, 500, 200]);

    // Now every answer is bad: the monitor gives up at the third in a row, not before, not never.
    health.status.code = 503;
    const before = health.served.length;
    const verdict = await Promise.race([death.then(() => "declared dead" as const), health.untilServed(before + 10).then(() => "10 bad answers tolerated" as const)]);
    expect(verdict).toBe("declared dead");
    expect(deaths).toHaveLength(1);
    expect(deaths[0]).toMatchObject({ label: "coordinator", reason: "CoordinatorUnhealthy" });
    expect(deaths[0]!.detail).toMatch(/loading for 3 probes in a row/);
    // No poll follows a death, so the run of 503s at the end is exactly the one that ended it.
    const lastGood = health.served.lastIndexOf(200);
    expect(health.served.slice(lastGood + 1)).toEqual([503, 503, 503]);
  });

  it("a closed transport port fails the cluster after the strikes run out", async () => {
    const { entry, ports } = await cluster();
    let resolve!: (e: DeathEvent) => void;
    const death = new Promise<DeathEvent>((r) => (resolve = r));
    const monitor = monitorCluster(entry, { nodeFor, pollIntervalMs: 40, strikes: 2, onDeath: (e) => resolve(e) });
    closers.push(() => monitor.stop());
    await new Promise<void>((r) => ports[0]!.close(() => r()));
    expect(await death).toMatchObject({ label: "stage-0", reason: "StagePortClosed" });
  });

  it("a transport port silent for less than the slow-path deadline (a link with a round trip of seconds) is asked again, not taken for a cut; one silent for good is a death", async () => {
    // Connections to stage-0's port get no answer while the rule holds: its SYNs are dropped, as a
    // link whose round trip passes the probe's deadline (or a cut one) leaves them unanswered.
    const { entry, ports } = await cluster();
    const rule = ["INPUT", "-p", "tcp", "--syn", "-d", host, "--dport", String(ports[0]!.port), "-j", "DROP"];
    const iptables = (action: "-I" | "-D"): Promise<unknown> =>
      run("iptables", ["-w", action, ...rule]).catch((error: Error) => {
        throw new Error(`this test drops SYNs with iptables (root, Debian's iptables): ${error.message}`, { cause: error });
      });
    await ensureTool("/usr/sbin/iptables", "iptables");
    const deaths: DeathEvent[] = [];
    // Probes of 300 ms: an unanswered one is asked again for 1.5 s.
    const monitor = monitorCluster(entry, { nodeFor, pollIntervalMs: 40, strikes: 2, probeTimeoutMs: 300, onDeath: (e) => deaths.push(e) });
    closers.push(() => monitor.stop());
    await iptables("-I");
    try {
      await sleep(900);
      await iptables("-D");
      // Without the second ask, two silent probes (0.6 s) were a death.
      await sleep(2_500);
      expect(deaths).toEqual([]);
      await iptables("-I");
      const deadline = Date.now() + 15_000;
      while (deaths.length === 0 && Date.now() < deadline) await sleep(50);
      expect(deaths[0]).toMatchObject({ label: "stage-0", reason: "StagePortClosed" });
      expect(deaths[0]!.detail).toContain("(no answer, not a refusal: the path to local is cut) for 2 probes in a row");
    } finally {
      await iptables("-D").catch(() => undefined);
    }
  });

  it("shard-engine: a transport port silent to new connections while /health answers ready is no death (its links vouch for themselves); once /health does not, it is", async () => {
    // Only new connections to stage-0's port are dropped, as a firewall that lets established
    // connections through does: the pipeline's own links, which shard-engine's /health vouches for, go on.
    const { entry, ports, health } = await cluster();
    const rule = ["INPUT", "-p", "tcp", "--syn", "-d", host, "--dport", String(ports[0]!.port), "-j", "DROP"];
    const iptables = (action: "-I" | "-D"): Promise<unknown> =>
      run("iptables", ["-w", action, ...rule]).catch((error: Error) => {
        throw new Error(`this test drops SYNs with iptables (root, Debian's iptables): ${error.message}`, { cause: error });
      });
    await ensureTool("/usr/sbin/iptables", "iptables");
    const deaths: DeathEvent[] = [];
    const monitor = monitorCluster({ ...entry, engine: "reference" }, { nodeFor, pollIntervalMs: 40, strikes: 2, probeTimeoutMs: 300, onDeath: (e) => deaths.push(e) });
    closers.push(() => monitor.stop());
    await iptables("-I");
    try {
      // Another engine's silent port is a death within 2 s here (the test above).
      await sleep(4_000);
      expect(deaths).toEqual([]);
      health.status.code = 503;
      const deadline = Date.now() + 15_000;
      while (deaths.length === 0 && Date.now() < deadline) await sleep(50);
      expect(deaths.length).toBeGreaterThan(0);
    } finally {
      await iptables("-D").catch(() => undefined);
    }
  });

  it("stop() ends watches and polls; no death is reported after it", async () => {
    const { entry } = await cluster();
    const deaths: DeathEvent[] = [];
    const monitor = monitorCluster(entry, { nodeFor, pollIntervalMs: 20, onDeath: (e) => deaths.push(e) });
    await new Promise((r) => setTimeout(r, 50));
    await monitor.stop();
    await node.run(["kill", "-9", String(entry.processes[0]!.pid)]);
    await new Promise((r) => setTimeout(r, 300));
    expect(deaths).toEqual([]);
  });
});

describe("a coordinator whose /health cannot answer while it generates", () => {
  /** A /health that answers 200, but holds every request until `busyUntil` (epoch ms) while busy. */
  async function busyEndpoint(): Promise<{ url: string; busyFor: (ms: number) => void }> {
    let busyUntil = 0;
    const server = createHttpServer((req, res) => {
      const wait = Math.max(0, busyUntil - Date.now());
      setTimeout(() => res.writeHead(200).end(), wait).unref();
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    closers.push(() => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    });
    return { url: `http://${host}:${(server.address() as AddressInfo).port}`, busyFor: (ms) => (busyUntil = Date.now() + ms) };
  }

  /** `slowPathTimeoutMs`: the longer ask's deadline (default: the monitor's, 5 × the probe's 200 ms). */
  async function watch(healthSilenceSeconds?: number, slowPathTimeoutMs?: number): Promise<{ busyFor: (ms: number) => void; deaths: DeathEvent[] }> {
    const coordinator = await startSleeper("coordinator");
    const endpoint = await busyEndpoint();
    const entry: WatchedCluster = {
      cluster: "busy",
      processes: [coordinator],
      ports: [],
      coordinatorUrl: endpoint.url,
      ...(healthSilenceSeconds === undefined ? {} : { healthSilenceSeconds }),
    };
    const deaths: DeathEvent[] = [];
    const monitor = monitorCluster(entry, {
      nodeFor,
      pollIntervalMs: 100,
      strikes: 2,
      probeTimeoutMs: 200,
      exitWatch: false,
      onDeath: (e) => deaths.push(e),
      ...(slowPathTimeoutMs === undefined ? {} : { slowPathTimeoutMs }),
    });
    closers.push(() => monitor.stop());
    return { busyFor: endpoint.busyFor, deaths };
  }

  it("by default three silent probes, the last asked again with 5 × the deadline, are a death; with health_silence_seconds a silence shorter than it is not, a longer one is, said with the setting", async () => {
    // Without the longer ask, three silent probes (200 ms each) are a death within a busy spell of 1.5 s.
    const hasty = await watch(undefined, 0);
    hasty.busyFor(1_500);
    await sleep(1_800);
    expect(hasty.deaths.map((d) => d.reason)).toEqual(["CoordinatorUnhealthy"]);
    // With it (1 s here), the third is answered as the spell ends; a silence that outlasts it is a death.
    const plain = await watch();
    plain.busyFor(1_500);
    await sleep(2_500);
    expect(plain.deaths).toEqual([]);
    plain.busyFor(60_000);
    const plainBy = Date.now() + 10_000;
    while (plain.deaths.length === 0 && Date.now() < plainBy) await sleep(100);
    expect(plain.deaths.map((d) => d.reason)).toEqual(["CoordinatorUnhealthy"]);

    const patient = await watch(3);
    patient.busyFor(1_500);
    await sleep(2_500);
    expect(patient.deaths).toEqual([]);
    patient.busyFor(60_000);
    const deadline = Date.now() + 10_000;
    while (patient.deaths.length === 0 && Date.now() < deadline) await sleep(100);
    expect(patient.deaths).toHaveLength(1);
    expect(patient.deaths[0]!.detail).toMatch(/\/health was silent for [34] s \(\d+ probes in a row; \[engine\] health_silence_seconds = 3\)$/);
  });
});
