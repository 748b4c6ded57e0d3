/**
 * A connection that dies without a word while the daemon runs on: a proxy between the page and the
 * daemon stops carrying the page's stream (as a NAT or a proxy that dropped it, or a laptop that
 * slept while its peer gave up, leaves it) but carries new connections. The page must not go on
 * saying the daemon is silent for ever: after four missed beats it calls it silent and opens a new
 * stream, which the running daemon answers. A real daemon (in this process, plan-only, beating
 * every 500 ms) and real Chromium.
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { startTcpProxy, type TcpProxy } from "../support/tcp-proxy.js";
import {
  definitionText,
  removeDefinition,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

let world: DaemonWorld;
let daemon: Daemon;
let proxy: TcpProxy;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  world = await startWorld();
  // Beats every 500 ms: silent after 4 missed beats, at least 3 s.
  await writeSettings(world, { heartbeatSeconds: 0.5 });
  await enableDashboard(world);
  await writeDefinition(world, "quiet", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
  daemon = await startInProcessDaemon(world);
  await waitForStatus(world, "quiet", (s) => s.health === "Stopped");
  const target = new URL(daemon.uiUrl!);
  proxy = await startTcpProxy(target.hostname, Number(target.port));
  browser = await launchChromium();
  // bypassCSP: the test evaluates its probes as strings, which the page's policy (no eval) refuses.
  page = await browser.newPage({ bypassCSP: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await proxy?.close();
  await daemon?.stop();
  await world?.close();
}, 60_000);

test("a stream cut silently while the daemon runs: silent after four missed beats, then live again on a new stream, without a reload", async () => {
  await page.goto(`http://127.0.0.1:${proxy.port}/`);
  await page.locator("tr[data-cluster=quiet]").waitFor({ timeout: 20_000 });
  await page.evaluate(`(() => {
    window.__marker = "no reload";
    window.__states = [];
    const record = () => {
      const state = document.querySelector("[data-testid=connection]")?.dataset.state;
      if (window.__states.at(-1) !== state) window.__states.push(state);
    };
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    record();
  })()`);
  const frozenAt = Date.now();
  proxy.freeze();
  await page.waitForFunction(`window.__states.includes("silent")`, undefined, { timeout: 15_000 });
  const silentAfterMs = Date.now() - frozenAt;
  await page.waitForFunction(`window.__states.at(-1) === "live"`, undefined, { timeout: 15_000 });
  const liveAfterMs = Date.now() - frozenAt;
  expect(await page.evaluate("window.__states")).toEqual(["live", "silent", "live"]);
  // The same daemon answered: not said restarted; the cluster is still listed; nothing reloaded.
  expect(await page.locator("[data-testid=connection]").textContent()).not.toContain("restarted");
  expect(await page.locator("tr[data-cluster]").count()).toBe(1);
  expect(await page.evaluate("window.__marker")).toBe("no reload");
  // Silent after 4 beats of 500 ms but at least 3 s; live again at the new stream's hello.
  expect(silentAfterMs).toBeGreaterThanOrEqual(3_000);
  expect(liveAfterMs).toBeLessThan(12_000);
}, 60_000);

test("the browser itself offline: the page says so beside the lost connection, and is live again as soon as the network is back", async () => {
  await page.waitForFunction(`document.querySelector("[data-testid=connection]")?.dataset.state === "live"`, undefined, { timeout: 15_000 });
  await page.context().setOffline(true);
  try {
    // The open stream may go on (the emulation cuts new requests): cut it too, silently, as a
    // network that went away leaves it. The page's new stream then fails in the offline browser.
    proxy.freeze();
    await page.waitForFunction(`(document.querySelector("[data-testid=connection]")?.textContent ?? "").includes("This browser says it is offline")`, undefined, {
      timeout: 20_000,
    });
    const said = (await page.locator("[data-testid=connection]").textContent())!;
    expect(said).toMatch(/The daemon (is gone|has been silent) since .+, \d+(\.\d)? s ago.* This browser says it is offline: its own network may be the cause\.$/);
  } finally {
    await page.context().setOffline(false);
  }
  const onlineAt = Date.now();
  await page.waitForFunction(`document.querySelector("[data-testid=connection]")?.dataset.state === "live"`, undefined, { timeout: 15_000 });
  // At the browser's "online", not at the next silence check or retry.
  expect(Date.now() - onlineAt).toBeLessThan(5_000);
  expect(await page.evaluate("window.__marker")).toBe("no reload");
}, 60_000);

test("a cluster removed while its page is open: the page says it was removed and when, and shows it again once it is back", async () => {
  await page.goto(`http://127.0.0.1:${proxy.port}/#/clusters/quiet`);
  await page.locator("#cluster-title").waitFor({ timeout: 20_000 });
  expect(await removeDefinition(world, "quiet")).toBe(true);
  const note = page.locator("[data-testid=no-status]");
  await note.waitFor({ timeout: 15_000 });
  expect(await note.textContent()).toMatch(/^“quiet” was removed at .+: its definition is gone, and the daemon stopped what of it ran and removed its status file\./);
  await writeDefinition(world, "quiet", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
  await page.locator("#cluster-title").waitFor({ timeout: 20_000 });
}, 60_000);
