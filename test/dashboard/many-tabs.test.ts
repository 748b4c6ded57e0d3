/**
 * A browser opens at most six connections to one address, and each open page of the dashboard holds
 * one for its live stream: six tabs would leave a seventh blank for ever. A tab out of sight gives
 * its stream back after a few seconds and opens a new one when it is looked at again. Real
 * Chromium (one browser context, so one pool of connections) against a real daemon (in this
 * process, plan-only). Out of sight is what the page is told: `visibilityState` hidden and a
 * `visibilitychange` event, as a browser says it when a tab goes to the background.
 */
import type { Browser, BrowserContext, Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { definitionText, startInProcessDaemon, startWorld, waitForStatus, writeDefinition, type DaemonWorld } from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

let world: DaemonWorld;
let daemon: Daemon;
let browser: Browser;
let context: BrowserContext;

beforeAll(async () => {
  world = await startWorld();
  await enableDashboard(world);
  await writeDefinition(world, "tabs", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
  daemon = await startInProcessDaemon(world);
  await waitForStatus(world, "tabs", (s) => s.health === "Stopped");
  browser = await launchChromium();
  // bypassCSP: the test evaluates its probes as strings, which the page's policy (no eval) refuses.
  context = await browser.newContext({ bypassCSP: true });
}, 120_000);

afterAll(async () => {
  await context?.close();
  await browser?.close();
  await daemon?.stop();
  await world?.close();
}, 60_000);

/** Tell the page it went out of sight (hidden) or came back (visible), as the browser does. */
async function setVisibility(page: Page, state: "hidden" | "visible"): Promise<void> {
  await page.evaluate(`(() => {
    Object.defineProperty(document, "visibilityState", { configurable: true, get: () => ${JSON.stringify(state)} });
    document.dispatchEvent(new Event("visibilitychange"));
  })()`);
}

const connectionOf = (page: Page): Promise<string | null> => page.locator("[data-testid=connection]").getAttribute("data-state");

test("six tabs out of sight give their streams back: a seventh loads; a tab looked at again is live again", async () => {
  const url = daemon.uiUrl!;
  const tabs: Page[] = [];
  for (let i = 0; i < 6; i++) {
    const tab = await context.newPage();
    await tab.goto(url);
    await tab.locator("tr[data-cluster=tabs]").waitFor({ timeout: 20_000 });
    tabs.push(tab);
  }
  for (const tab of tabs) await setVisibility(tab, "hidden");
  // The streams are given back 5 s after the tabs went out of sight.
  const seventh = await context.newPage();
  const started = Date.now();
  await seventh.goto(url, { timeout: 30_000 });
  await seventh.locator("tr[data-cluster=tabs]").waitFor({ timeout: 30_000 });
  expect(await connectionOf(seventh)).toBe("live");
  console.log(`many tabs: the seventh tab loaded ${Date.now() - started} ms after six went out of sight`);

  // The first tab comes back into sight: a new stream, live again, the cluster still shown.
  await seventh.close();
  await setVisibility(tabs[0]!, "visible");
  await tabs[0]!.waitForFunction(`document.querySelector("[data-testid=connection]")?.dataset.state === "live"`, undefined, { timeout: 15_000 });
  expect(await tabs[0]!.locator("tr[data-cluster=tabs]").count()).toBe(1);
  // A tab out of sight is not called silent for the beats it does not hear.
  expect(await connectionOf(tabs[1]!)).not.toBe("silent");
}, 120_000);
