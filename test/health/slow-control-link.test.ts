/**
 * A node whose control link is slow, not lost (a VPN between houses, a link saturated by a model's
 * transfer): its SSH commands take longer than a liveness probe's deadline (1 s). Through a real
 * sshd behind a proxy that carries every byte 400 ms late each way (a command there takes about
 * 2 s), the health monitor asks a round that would make the last strike again with a longer
 * deadline and never calls the node unobservable, and a pass's look sees its process alive. With
 * the longer ask off, the monitor calls the node unobservable within seconds; a look at a node the
 * monitor already reports silent does not wait for the longer ask.
 */
import { afterAll, beforeAll, expect, it } from "vitest";
import { monitorCluster, observeCluster, type MonitorOptions, type ObservabilityEvent, type WatchedCluster } from "../../src/health/index.js";
import { NodePool, type NodeAccess } from "../../src/nodes/index.js";
import { sshNodeConfig, startSshdNodes, type SshdSet } from "../support/sshd.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

let sshd: SshdSet;
let proxy: TcpProxy;
let pool: NodePool;
/** The node reached straight (to start and stop the process) and through the slow link. */
let direct: NodeAccess;
let slow: NodeAccess;
let cluster: WatchedCluster;

beforeAll(async () => {
  sshd = await startSshdNodes({ count: 1 });
  proxy = await startTcpProxy(sshd.nodes[0]!.host, sshd.nodes[0]!.port, { delayMs: 400 });
  // A handshake takes about 9 round trips: 7 s over this link, where a node's default is 4 s
  // (its own deadline grows with the TCP connection's time, which the proxy cannot slow).
  pool = new NodePool({ knownHostsPath: sshd.knownHostsPath, sshConfigPath: `${sshd.root}/no-config`, connectDeadlineMs: 20_000 });
  direct = pool.get(sshNodeConfig(sshd, 0));
  slow = pool.get(sshNodeConfig(sshd, 0, { name: "slow", host: "127.0.0.1", port: proxy.port, hostKeyPolicy: "accept-new" }));
  const { pid, startTime } = await direct.startDetached(["sleep", "300"], { logFile: `${sshd.nodes[0]!.modelDir}/stage-0.log`, cwd: sshd.nodes[0]!.modelDir });
  cluster = { cluster: "c", processes: [{ role: "stage", index: 0, node: "slow", pid, startTime }], ports: [] };
  // Connected once, outside the measured time.
  await slow.run(["true"]);
}, 90_000);

afterAll(async () => {
  const process = cluster?.processes[0];
  if (process !== undefined) await direct.signal(process.pid, "SIGKILL", process.startTime).catch(() => undefined);
  await pool?.close();
  await proxy?.close();
  await sshd?.close();
});

/** What the monitor reports of the slow node over `ms`, with `options`. */
async function watch(ms: number, options: Partial<MonitorOptions>): Promise<ObservabilityEvent[]> {
  const said: ObservabilityEvent[] = [];
  const monitor = monitorCluster(cluster, {
    nodeFor: () => slow,
    pollIntervalMs: 1_000,
    strikes: 2,
    exitWatch: false,
    onUnobservable: (event) => said.push(event),
    onDeath: (death) => said.push({ cluster: "c", node: death.node, labels: [death.label], detail: `death: ${death.detail}`, at: new Date().toISOString() }),
    ...options,
  });
  await new Promise((resolve) => setTimeout(resolve, ms));
  await monitor.stop();
  return said;
}

it("a command on the slow link takes longer than the probe's deadline", async () => {
  const began = performance.now();
  await slow.run(["true"]);
  expect(performance.now() - began).toBeGreaterThan(1_000);
});

it("the monitor asks a last-strike round again with room for the round trip: the node is never called unobservable", async () => {
  expect(await watch(10_000, {})).toEqual([]);
}, 30_000);

it("without the longer ask, the same node is called unobservable", async () => {
  const said = await watch(8_000, { slowPathTimeoutMs: 0 });
  expect(said.map((e) => e.node)).toContain("slow");
}, 30_000);

it("a pass's look sees the process alive through the slow link, and does not wait for the longer ask on a node the monitor reports silent", async () => {
  const seen = await observeCluster(cluster, { nodeFor: () => slow });
  expect(seen.stages.map((s) => s.liveness)).toEqual(["alive"]);
  const began = performance.now();
  const known = await observeCluster(cluster, { nodeFor: () => slow, unanswering: new Set(["slow"]) });
  expect(known.stages.map((s) => s.liveness)).toEqual(["unknown"]);
  expect(performance.now() - began).toBeLessThan(4_000);
}, 30_000);
