/**
 * The token dialog with a token the browser cannot send, in real headless Chromium against the
 * dashboard's own server (a token configured; statuses published through a status feed from the
 * captured fixtures): a token pasted with a curly quote or an accent made fetch throw before any
 * request, and "Reconcile now" said "Asking…" for ever with nothing else on the page. The page must
 * say why and ask again; the right token is then taken.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Dashboard } from "../../src/dashboard/index.js";
import { StatusFeed, type ClusterStatus } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { startFeedDashboard } from "./support.js";

const token = "dialog-test-token-41d8";
const healthy = (JSON.parse(readFileSync(join(import.meta.dirname, "fixtures/fault-statuses.json"), "utf8")) as { healthy: ClusterStatus }).healthy;
const name = healthy.cluster;

let feed: StatusFeed;
let dashboard: Dashboard;
let browser: Browser;
let page: Page;
/** Reconcile requests the dashboard passed on to the daemon's side. */
const taken: string[] = [];
const pageErrors: string[] = [];

beforeAll(async () => {
  feed = new StatusFeed();
  dashboard = await startFeedDashboard(feed, name, { token, onReconcile: (cluster) => void taken.push(cluster) });
  feed.publish(healthy);
  browser = await launchChromium();
  page = await browser.newPage();
  page.on("pageerror", (error) => void pageErrors.push(error.message));
  await page.goto(`${dashboard.url}#/clusters/${name}`);
  await page.locator("#cluster-title").waitFor();
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await dashboard?.close();
});

test("a token with a curly quote or an accent is said to be unsendable and asked again; the right one is then taken", async () => {
  const dialog = page.locator("[data-testid=token-dialog]");
  const alert = dialog.locator("[role=alert]");
  await page.locator("[data-testid=reconcile]").click();
  await dialog.waitFor({ state: "visible" });
  for (const pasted of [`“${token}”`, "tökén", "two words"]) {
    await page.locator("[data-testid=token-input]").fill(pasted);
    await page.keyboard.press("Enter");
    await alert.waitFor({ timeout: 5_000 });
    expect(await alert.textContent(), pasted).toContain("That token cannot be sent: a dashboard token is one word of visible ASCII characters");
    expect(await dialog.isVisible()).toBe(true);
  }
  await page.locator("[data-testid=token-input]").fill(token);
  await page.keyboard.press("Enter");
  // A locator's wait, not a string predicate: Playwright once evaluated that string with eval,
  // which the page's CSP (script-src 'self') refused (CI run 52).
  await page.locator("[data-testid=reconcile-note]", { hasText: "took the request" }).waitFor({ timeout: 10_000 });
  expect(await page.locator("[data-testid=reconcile]").textContent()).toBe("Reconcile now");
  expect(taken).toEqual([name]);
  expect(pageErrors).toEqual([]);
}, 60_000);
