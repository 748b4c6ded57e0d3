/**
 * A status file the daemon cannot write: the page shows the daemon's latest status, so without a
 * word it would disagree with `shardctl status` and CI, which read the file. A real daemon (in this
 * process, plan-only) and real Chromium; a directory put in the status file's place (as a bad
 * checkout might leave it; a full disk fails the same way) makes each write fail until it is gone.
 */
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { definitionText, startInProcessDaemon, startWorld, waitForStatus, writeDefinition, type DaemonWorld } from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

let world: DaemonWorld;
let daemon: Daemon;
let browser: Browser;
let page: Page;

beforeAll(async () => {
  world = await startWorld();
  await enableDashboard(world);
  await writeDefinition(world, "w", definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" }));
  daemon = await startInProcessDaemon(world);
  await waitForStatus(world, "w", (s) => s.health === "Stopped");
  browser = await launchChromium();
  page = await browser.newPage({ bypassCSP: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await daemon?.stop();
  await world?.close();
}, 60_000);

/** A pass of w now, as "Reconcile now" asks for one: it composes a new status (its history grows) and writes it. */
async function reconcileW(): Promise<void> {
  const answer = await fetch(new URL("api/clusters/w/reconcile", daemon.uiUrl), { method: "POST" });
  expect(answer.status).toBe(202);
}

test("the page says when the daemon cannot write a cluster's status file, and stops saying it once a write succeeds", async () => {
  await page.goto(`${daemon.uiUrl}#/clusters/w`);
  await page.locator("#cluster-title").waitFor({ timeout: 20_000 });
  expect(await page.locator("[data-testid=file-failure]").count()).toBe(0);

  const file = join(world.clustersDir, "w.status.json");
  await rm(file);
  await mkdir(file);
  await reconcileW();
  const note = page.locator("[data-testid=file-failure]");
  await note.waitFor({ timeout: 20_000 });
  expect(await note.textContent()).toMatch(/StatusWriteFailed could not write \S+w\.status\.json: .*EISDIR/);
  // A page opened now learns it on connecting; the list marks the row.
  const other = await browser.newPage({ bypassCSP: true });
  await other.goto(daemon.uiUrl!);
  await other.locator("tr[data-cluster=w] [data-testid=file-failure-tag]").waitFor({ timeout: 20_000 });
  await other.close();

  await rm(file, { recursive: true });
  await reconcileW();
  await waitForStatus(world, "w", () => true);
  await page.waitForFunction(`document.querySelector("[data-testid=file-failure]") === null`, undefined, { timeout: 20_000 });
});
