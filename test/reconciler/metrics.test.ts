/** `/metrics` (Prometheus text format): passes by result, pass duration, clusters by health, stages up, the process's memory and file descriptors. */
import { request } from "node:http";
import { connect, type Socket } from "node:net";
import { expect, test } from "vitest";
import { definitionText, enableMetrics, removeDefinition, revisionOf, waitForStatus, writeDefinition } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

let url: string;

const dw = useDaemonWorld({
  settings: { enabled: false },
  prepare: async (world) => {
    url = await enableMetrics(world);
  },
});

test("serves passes by result, pass duration, clusters by health and stages up, and each cluster's health, removed with it", async () => {
  const { world, daemon } = dw;
  await writeDefinition(world, "m1", definitionText(world, { nodes: ["l1", "l2"] }));
  await writeDefinition(world, "m2", definitionText(world, { nodes: ["l2", "l1"], suspend: true }));
  const [r1, r2] = [await revisionOf(world, "m1"), await revisionOf(world, "m2")];
  await waitForStatus(world, "m1", (s) => s.observedRevision === r1 && s.health === "Disabled");
  await waitForStatus(world, "m2", (s) => s.observedRevision === r2 && s.health === "Suspended");
  await daemon.whenIdle();

  const response = await fetch(url);
  expect(response.status).toBe(200);
  expect(response.headers.get("content-type")).toMatch(/^text\/plain/);
  const text = await response.text();
  expect(text).toMatch(/^shardctl_reconcile_passes_total\{result="success"\} [1-9]\d*$/m);
  expect(text).toMatch(/^shardctl_reconcile_pass_duration_seconds_count [1-9]\d*$/m);
  expect(text).toMatch(/^shardctl_clusters\{health="Disabled"\} 1$/m);
  expect(text).toMatch(/^shardctl_clusters\{health="Suspended"\} 1$/m);
  expect(text).toMatch(/^shardctl_clusters\{health="Healthy"\} 0$/m);
  expect(text).toMatch(/^shardctl_stages_up 0$/m);
  // The process's own figures, under the names Node.js dashboards know.
  expect(text).toMatch(/^process_resident_memory_bytes [1-9]\d*$/m);
  expect(text).toMatch(/^nodejs_heap_size_used_bytes [1-9]\d*$/m);
  expect(text).toMatch(/^process_open_fds [1-9]\d*$/m);
  expect((await fetch(url.replace("/metrics", "/other"))).status).toBe(404);
  // Per cluster, as the status files say; a scrape config's query parameters are no other path.
  const scraped = await (await fetch(`${url}?format=prometheus`)).text();
  expect(scraped).toMatch(/^shardctl_cluster_health\{cluster="m1",health="Disabled"\} 1$/m);
  expect(scraped).toMatch(/^shardctl_cluster_health\{cluster="m1",health="Healthy"\} 0$/m);
  expect(scraped).toMatch(/^shardctl_cluster_health\{cluster="m2",health="Suspended"\} 1$/m);
  expect(scraped).toMatch(/^shardctl_cluster_ready\{cluster="m1"\} 0$/m);
  // Every pass result is a series from the start (an alert on a rate needs the series before the first failure).
  expect(scraped).toMatch(/^shardctl_reconcile_passes_total\{result="stalled"\} 0$/m);
  // A removed cluster's series go with it.
  expect(await removeDefinition(world, "m2")).toBe(true);
  await daemon.whenIdle();
  const after = await (await fetch(url)).text();
  expect(after).not.toMatch(/cluster="m2"/);
  expect(after).toMatch(/^shardctl_clusters\{health="Suspended"\} 0$/m);
  expect(after).toMatch(/^shardctl_cluster_health\{cluster="m1",health="Disabled"\} 1$/m);
});

// Regression: the metrics listener had no cap on connections and no Host check: 20 000 idle
// connections took every descriptor of the daemon (its file watch failed and the daemon ended, the
// embedded router with it), and a page of another site could read the clusters' health through DNS
// rebinding.
test("on loopback it serves loopback names only; idle connections past its cap are dropped, and it answers once they go", async () => {
  const target = new URL(url);
  const foreign = await new Promise<number>((resolve, reject) => {
    const req = request({ host: target.hostname, port: target.port, path: "/metrics", headers: { host: "evil.example" } }, (res) => {
      res.resume();
      resolve(res.statusCode ?? 0);
    });
    req.on("error", reject);
    req.end();
  });
  expect(foreign).toBe(403);

  // 300 connections that send nothing: the cap (256 at most) drops the rest at once.
  const sockets = await Promise.all(
    Array.from(
      { length: 300 },
      () =>
        new Promise<Socket>((resolve) => {
          const socket = connect(Number(target.port), target.hostname, () => resolve(socket));
          socket.on("error", () => undefined);
        }),
    ),
  );
  await new Promise((r) => setTimeout(r, 1_000));
  const dropped = sockets.filter((s) => s.closed || s.readyState !== "open").length;
  expect(dropped).toBeGreaterThanOrEqual(300 - 256);
  for (const socket of sockets) socket.destroy();
  await new Promise((r) => setTimeout(r, 500));
  expect((await fetch(url)).status).toBe(200);
});
