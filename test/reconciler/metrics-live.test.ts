/**
 * `/metrics` follows the status the daemon writes, not only the end of a pass: a stage killed while
 * its cluster serves shows as not Healthy before the pass that relaunches it ends (its gauges were
 * set only when a pass ended, so a death relaunched within that pass never showed at all). Local
 * nodes with the reference engine; the daemon's own metrics listener.
 */
import { expect, test } from "vitest";
import { enableMetrics, enginePidOf, readStatusFile, removeDefinition, sleep } from "./daemon-fixture.js";
import { useDaemonWorld } from "./use-daemon-world.js";

let url: string;
const dw = useDaemonWorld({
  settings: { enabled: true },
  prepare: async (world) => {
    url = await enableMetrics(world);
  },
});

/** A series' value in Prometheus text, or undefined. */
function valueOf(text: string, series: string): number | undefined {
  const line = text.split("\n").find((l) => l.startsWith(`${series} `));
  return line === undefined ? undefined : Number(line.slice(series.length + 1));
}

/** Passes ended so far, all results. */
function passesOf(text: string): number {
  return ["success", "waiting", "failed", "stalled"].reduce((sum, result) => sum + (valueOf(text, `shardctl_reconcile_passes_total{result="${result}"}`) ?? 0), 0);
}

test("a killed stage shows as not Healthy in /metrics before the pass that relaunches it ends", async () => {
  const revision = await dw.define("live", { nodes: ["l1", "l2"] });
  const serving = await dw.waitServing("live", revision);
  await dw.daemon.whenIdle();
  const before = await (await fetch(url)).text();
  expect(valueOf(before, 'shardctl_cluster_health{cluster="live",health="Healthy"}')).toBe(1);
  expect(valueOf(before, 'shardctl_cluster_stages{cluster="live",liveness="alive"}')).toBe(2);
  const passesBefore = passesOf(before);

  process.kill(await enginePidOf(serving.stages[1]!.pid!), "SIGKILL");
  let seen: string | undefined;
  for (let i = 0; i < 200 && seen === undefined; i++) {
    const text = await (await fetch(url)).text();
    if (valueOf(text, 'shardctl_cluster_health{cluster="live",health="Healthy"}') === 0) seen = text;
    else await sleep(25);
  }
  expect(seen, "never not Healthy in /metrics").toBeDefined();
  // Said by the status the death wrote, not by the end of a pass.
  expect(passesOf(seen!)).toBe(passesBefore);
  expect(valueOf(seen!, 'shardctl_cluster_ready{cluster="live"}')).toBe(0);
  // The death is counted once, under its reason; no death was counted before it.
  expect(before).not.toMatch(/^shardctl_cluster_deaths_total\{/m);
  // And as the status file says once relaunched (the feed is published as the file is written: asked until both agree).
  await dw.waitServing("live", revision, 60_000);
  let agreed = false;
  let last = "";
  for (let i = 0; i < 100 && !agreed; i++) {
    const status = (await readStatusFile(dw.world, "live"))!;
    last = await (await fetch(url)).text();
    agreed =
      valueOf(last, `shardctl_cluster_health{cluster="live",health="${status.health}"}`) === 1 &&
      valueOf(last, 'shardctl_cluster_stages{cluster="live",liveness="alive"}') === status.stages.filter((s) => s.alive).length;
    if (!agreed) await sleep(100);
  }
  expect(agreed, last).toBe(true);
  expect(last.split("\n").filter((l) => l.startsWith("shardctl_cluster_deaths_total{"))).toEqual(['shardctl_cluster_deaths_total{cluster="live",reason="StageDied"} 1']);
  // Gone with the cluster.
  expect(await removeDefinition(dw.world, "live", 60_000)).toBe(true);
  expect(await (await fetch(url)).text()).not.toMatch(/^shardctl_cluster_deaths_total\{/m);
}, 120_000);
