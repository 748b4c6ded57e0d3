/**
 * A coordinator the daemon reaches over a slow link (the daemon at home, the cluster elsewhere; a
 * link saturated by a model's transfer): every /health answer comes later than the probe's deadline
 * (1 s). Through a proxy that carries every byte 600 ms late each way, a real shard-engine's
 * /health takes about 1.2 s. The health monitor asks a silence that would make the last strike
 * again with a longer deadline, and the coordinator is never declared dead; with the longer ask
 * off, the same coordinator is declared dead (CoordinatorUnhealthy) within seconds.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { bundledShardEngineCommand } from "../../src/engines/index.js";
import { monitorCluster, type DeathEvent, type MonitorOptions, type WatchedCluster } from "../../src/health/index.js";
import { LocalNode } from "../../src/nodes/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { freePort, nextHost, requireBuild } from "../engine/support.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";

let dir: string;
let node: LocalNode;
let proxy: TcpProxy;
let cluster: WatchedCluster;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "shardctl-slow-coordinator-"));
  await makeTestModel(join(dir, "m"), { layers: 2, hidden: 64, seed: 4 });
  node = new LocalNode({ name: "local", host: "local", modelDir: dir });
  const host = await nextHost();
  const port = await freePort(host);
  const { pid, startTime } = await node.startDetached([...bundledShardEngineCommand, "-m", join(dir, "m"), "--host", host, "--port", String(port), "--no-warmup"], {
    logFile: join(dir, "coordinator.log"),
  });
  for (let i = 0; i < 200; i++) {
    if (
      (await fetch(`http://${host}:${port}/health`).then(
        (r) => r.status,
        () => 0,
      )) === 200
    )
      break;
    await new Promise((r) => setTimeout(r, 50));
  }
  proxy = await startTcpProxy(host, port, { delayMs: 600 });
  cluster = {
    cluster: "c",
    processes: [{ role: "coordinator", node: "local", pid, startTime }],
    ports: [],
    coordinatorUrl: `http://127.0.0.1:${proxy.port}`,
    // Only /health is watched here.
    generationWatchdogSeconds: 0,
  };
}, 60_000);

afterAll(async () => {
  const process = cluster?.processes[0];
  if (process !== undefined) await node.signal(process.pid, "SIGKILL", process.startTime).catch(() => undefined);
  await proxy?.close();
  await rm(dir, { recursive: true, force: true });
});

/** The deaths the monitor declares over `ms`, with `options`. */
async function watch(ms: number, options: Partial<MonitorOptions>): Promise<DeathEvent[]> {
  const deaths: DeathEvent[] = [];
  const monitor = monitorCluster(cluster, {
    nodeFor: () => node,
    pollIntervalMs: 1_000,
    strikes: 2,
    exitWatch: false,
    onDeath: (death) => deaths.push(death),
    ...options,
  });
  await new Promise((resolve) => setTimeout(resolve, ms));
  await monitor.stop();
  return deaths;
}

it("the coordinator's /health answers through the slow link later than the probe's deadline", async () => {
  const began = performance.now();
  expect((await fetch(`${cluster.coordinatorUrl}/health`)).status).toBe(200);
  expect(performance.now() - began).toBeGreaterThan(1_000);
});

it("the monitor asks a last-strike silence again with room for the round trip: the coordinator is never declared dead", async () => {
  expect(await watch(6_000, {})).toEqual([]);
}, 30_000);

it("without the longer ask, the same coordinator is declared dead", async () => {
  const deaths = await watch(7_000, { slowPathTimeoutMs: 0 });
  expect(deaths.map((d) => d.reason)).toContain("CoordinatorUnhealthy");
}, 30_000);
