/**
 * A daemon that is stopped (SIGSTOP: a frozen VM, a debugger) or hung keeps its pid, its lock and
 * its dashboard connections, and the status files it wrote keep saying what they said. Its
 * heartbeat stops — the lock's modification time and the dashboard's `beat` events — so `status`
 * warns, `wait` does not accept a condition it wrote, `reconcile` says why nobody takes the
 * request, and the page in Chromium says the daemon is silent; each clears once it runs again.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { launchChromium } from "../support/chromium.js";
import { allocateHost } from "../support/test-world.js";
import {
  conditionOf,
  definitionText,
  freePort,
  runShardctl,
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
import { enableDashboard } from "../dashboard/support.js";

/** The settings' heartbeat here, s: silent after 4 missed beats, and at least 3 s. */
const heartbeatSeconds = 0.5;
const silentAfterMs = Math.max(4 * heartbeatSeconds * 1000, 3000);

let world: DaemonWorld;
let daemon: SpawnedDaemon;
let url: string;
let browser: Browser | undefined;
beforeAll(async () => {
  world = await startWorld();
  // Distributed serving off: the cluster is planned (Planned=True), nothing is launched.
  await writeSettings(world, { enabled: false, heartbeatSeconds });
  const host = await allocateHost();
  const port = await freePort(host);
  await enableDashboard(world, { address: `${host}:${port}` });
  url = `http://${host}:${port}/`;
  await writeDefinition(world, "quiet", definitionText(world, { nodes: ["l1", "l2"] }));
  daemon = await spawnDaemon(world);
  await waitWatching(daemon);
  await waitForStatus(world, "quiet", (s) => conditionOf(s, "Planned")?.status === "True");
});
afterAll(async () => {
  await browser?.close();
  if (daemon !== undefined && daemon.child.exitCode === null) {
    daemon.child.kill("SIGCONT");
    daemon.child.kill("SIGTERM");
    await daemon.exited;
  }
  await world?.close();
});

/** Stop the daemon for the length of `during`, then let it run again. */
async function whileStopped(during: () => Promise<void>): Promise<void> {
  daemon.child.kill("SIGSTOP");
  try {
    await during();
  } finally {
    daemon.child.kill("SIGCONT");
  }
}

test("status, wait and reconcile name a stopped daemon as silent, and trust it again once it runs", async () => {
  const pid = daemon.child.pid!;
  const answering = await runShardctl(world, ["wait", "quiet", "--for", "condition=Planned", "--timeout", "5s"]);
  expect(answering.code).toBe(0);
  expect(answering.stderr).toBe("");
  expect((await runShardctl(world, ["status"])).stderr).toBe("");

  await whileStopped(async () => {
    await sleep(silentAfterMs + 700);
    const status = await runShardctl(world, ["status"]);
    expect(status.code).toBe(0);
    expect(status.stderr).toMatch(
      new RegExp(
        `^warning: the shardctl daemon watching \\S+ \\(pid ${pid}, not heard from for \\d+ s: stopped or hung, or is its folder read-only\\?\\) keeps no status current`,
      ),
    );
    // The file still says what it said; nothing that runs keeps it so.
    expect(status.stdout).toMatch(/^quiet\s/m);
    const waited = await runShardctl(world, ["wait", "quiet", "--for", "condition=Planned", "--timeout", "2s"]);
    expect(waited.code).toBe(1);
    expect(waited.stderr).toContain(`timed out after 2s waiting for condition Planned`);
    expect(waited.stderr).toContain(`the status says Planned=True, but the daemon that wrote it is silent (pid ${pid}, not heard from for`);
    const asked = await runShardctl(world, ["reconcile", "quiet"]);
    expect(asked.code).toBe(1);
    expect(asked.stderr).toContain(`is silent (pid ${pid}`);
  });
  // Running again: its next beat makes it trusted.
  const resumed = await runShardctl(world, ["wait", "quiet", "--for", "condition=Planned", "--timeout", "10s"]);
  expect(resumed.code).toBe(0);
  expect(resumed.stderr).toBe("");
  expect((await runShardctl(world, ["status"])).stderr).toBe("");
});

test("the dashboard in Chromium says a connected daemon has gone silent, and goes live at its next beat", async () => {
  browser = await launchChromium();
  // bypassCSP: the probes below are evaluated as strings, which the page's policy (no eval) refuses.
  const page = await browser.newPage({ bypassCSP: true });
  await page.goto(`${url}#/clusters/quiet`);
  const connection = `document.querySelector("[data-testid=connection]")?.dataset.state`;
  await until(page, `${connection} === "live" && document.querySelector("[data-testid=reconcile]") !== null`);
  expect(await page.locator("[data-testid=reconcile]").isDisabled()).toBe(false);
  await whileStopped(async () => {
    // The connection stays open (the kernel keeps it): only the missing beats tell.
    await until(page, `${connection} === "silent"`, silentAfterMs + 5_000);
    expect(await page.locator("[data-testid=connection]").textContent()).toMatch(/The daemon has been silent since .+, \d+(\.\d)? s ago \(stopped or hung\?\)/);
    expect(await page.locator("[data-testid=reconcile]").isDisabled()).toBe(true);
  });
  await until(page, `${connection} === "live"`, 10_000);
  expect(await page.locator("[data-testid=connection]").textContent()).toContain("Live");
  expect(await page.locator("[data-testid=reconcile]").isDisabled()).toBe(false);
});

/** Wait until `condition` (browser-side JavaScript) holds in the page. */
async function until(page: Page, condition: string, timeoutMs = 30_000): Promise<void> {
  await page.waitForFunction(condition, undefined, { timeout: timeoutMs, polling: 100 });
}
