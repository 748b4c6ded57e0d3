/**
 * Thirty clusters, a third of them with long names and a sixth with definitions whose issues make
 * messages of a thousand characters, from a real daemon (in this process, plan-only: nothing is
 * launched), in real Chromium on a wide and a phone-sized screen: every row reachable from the
 * keyboard with its health in view, and on an invalid cluster's page its long message said once at
 * the top, not once per condition that repeats it (three times: it pushed the page's facts and its
 * one button screens down on a phone).
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import type { Daemon } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { definitionText, startInProcessDaemon, startWorld, waitForStatus, type DaemonWorld } from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

let world: DaemonWorld;
let daemon: Daemon;
let browser: Browser;
let url: string;
const names: string[] = [];
/** A node name no settings declare, long enough to be reported twice (unknown, too long). */
const strayNode = "nosuchnode-with-a-very-long-name-that-is-declared-nowhere-in-the-settings-file";
const invalid = "c01-invalid-definition";

beforeAll(async () => {
  world = await startWorld();
  await enableDashboard(world);
  for (let i = 0; i < 30; i++) {
    const name =
      i === 1 ? invalid : i % 3 === 0 ? `c${String(i).padStart(2, "0")}-a-rather-long-descriptive-name-for-the-production-fleet` : `c${String(i).padStart(2, "0")}`;
    names.push(name);
    const text =
      i % 6 === 1
        ? `desired = "running"\nnodes = ["l1", "${strayNode}"]\n[model]\nid = "${world.modelDir}"\n`
        : definitionText(world, { nodes: ["l1", "l2"], desired: "stopped" });
    await writeFile(join(world.clustersDir, `${name}.toml`), text);
  }
  daemon = await startInProcessDaemon(world);
  url = daemon.uiUrl!;
  for (const name of names) await waitForStatus(world, name, () => true, 30_000);
  browser = await launchChromium();
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await daemon?.stop();
  await world?.close();
}, 60_000);

async function openPage(width: number): Promise<Page> {
  // bypassCSP: the test evaluates its probes as strings, which the page's policy (no eval) refuses.
  return browser.newPage({ viewport: { width, height: 800 }, bypassCSP: true });
}

for (const width of [1280, 390]) {
  test(`${width} px: thirty rows, each reached from the keyboard, each health badge in view`, async () => {
    const page = await openPage(width);
    await page.goto(url);
    await page.waitForFunction(`document.querySelectorAll("tr[data-cluster]").length === 30`, undefined, { timeout: 20_000 });
    // Tab from the top of the page: "Skip to content" first (the page does not take the focus on
    // load), then every cluster's link, in the list's order.
    await page.keyboard.press("Tab");
    expect(await page.evaluate(`document.activeElement?.textContent?.trim()`)).toBe("Skip to content");
    const reached: string[] = [];
    for (let i = 0; i < 40 && reached.length < 30; i++) {
      await page.keyboard.press("Tab");
      const focused = (await page.evaluate(`document.activeElement?.closest("tr[data-cluster]")?.dataset.cluster ?? ""`)) as string;
      if (focused !== "") reached.push(focused);
    }
    expect(reached).toEqual([...names].sort((a, b) => a.localeCompare(b)));
    // Each badge lies inside the table's scroll box without scrolling it sideways (and the page itself never scrolls sideways).
    const outside = (await page.evaluate(`(() => {
      const box = document.querySelector("[data-testid=clusters-table]").parentElement.getBoundingClientRect();
      return [...document.querySelectorAll("tr[data-cluster]")]
        .filter((row) => row.querySelector("[data-testid=health-badge]").getBoundingClientRect().right > box.right)
        .map((row) => row.dataset.cluster);
    })()`)) as string[];
    expect(outside).toEqual([]);
    expect(await page.evaluate("document.documentElement.scrollWidth <= innerWidth")).toBe(true);
    await page.close();
  });

  test(`${width} px: an invalid definition's long message is said once at the top of its page`, async () => {
    const page = await openPage(width);
    await page.goto(`${url}#/clusters/${invalid}`);
    await page.locator("[data-testid=ready-line]").waitFor({ timeout: 20_000 });
    const head = (await page.locator("#cluster-title").locator("xpath=ancestor::header[1]").textContent())!;
    // The stray node is named in the message (twice: too long, and unknown); the head says it once only.
    const ready = (await page.locator("[data-testid=ready-line]").textContent())!;
    const perMessage = ready.split(strayNode.slice(0, 40)).length - 1;
    expect(perMessage).toBeGreaterThan(0);
    expect(head.split(strayNode.slice(0, 40)).length - 1).toBe(perMessage);
    // Which conditions agree with Ready is still said, in words.
    expect(await page.locator("[data-testid=why]").textContent()).toMatch(/Stalled True: InvalidDefinition/);
    // On a wide screen the button is in the first screen (on a phone the one message alone fills most of it).
    await page.evaluate("window.scrollTo(0, 0)");
    const button = await page.locator("[data-testid=reconcile]").boundingBox();
    if (width >= 1280) expect(button!.y + button!.height).toBeLessThanOrEqual(800);
    await page.close();
  });
}
