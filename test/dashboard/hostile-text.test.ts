/**
 * Text the dashboard shows but nobody on our side wrote, in real headless Chromium: a real daemon
 * (in this process) launches a two-stage cluster whose engine binary writes hostile lines on
 * stderr and exits at once (markup and script, a right-to-left override, ANSI colour and title
 * escapes, a 3000-character word), so the restart evidence carries them; and links whose hash a
 * person may paste broken. The page must show such text as text, as `shardctl status` prints it
 * (each control and bidirectional character as its `\u` escape), inside the page's width.
 */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { showText } from "../../src/errors/index.js";
import type { Daemon } from "../../src/reconciler/index.js";
import { bundledShardEngineCommand } from "../../src/launch/index.js";
import { launchChromium } from "../support/chromium.js";
import {
  definitionText,
  enginesOf,
  freePort,
  freePortRange,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

/** What the engine writes on stderr before it exits 3: one line per hazard. */
const hostileLines = [
  `<script>window.__pwned = 1</script><img src=x onerror="window.__pwned = 2"> loading`,
  // U+202E RIGHT-TO-LEFT OVERRIDE: shown raw, "gpj.exe" reads "exe.jpg" and the rest of the line runs backwards.
  "weights from \u202egpj.exe\u202c and the rest of this line",
  // ESC sequences: a colour, and an OSC that retitles a terminal (ended by BEL).
  "\u001b[31mERROR\u001b[0m layer 3 failed \u001b]0;retitled\u0007",
  "A".repeat(3000),
];

/** Browser-side: whether the page shows a raw control or bidirectional character (newlines and tabs aside). */
const rawControlShown = `/[\\u0000-\\u0008\\u000b-\\u001f\\u007f-\\u009f\\u202a-\\u202e\\u2066-\\u2069]/.test(document.body.innerText)`;

let world: DaemonWorld;
let daemon: Daemon;
let browser: Browser;
let page: Page;
let url: string;

beforeAll(async () => {
  world = await startWorld();
  // One launch per revision: the first failure stalls the cluster, and its evidence stays put.
  await writeSettings(world, { enabled: true, restartBudget: 1 });
  await enableDashboard(world);
  await mkdir(join(world.root, "bin"), { recursive: true });
  // "hostile" answers --version as shard-engine does and fails at launch; "hostile-version" fails
  // the version check itself, so its words reach the last error's message.
  const shardEngine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  const hostile = `cat >&2 <<'EOF'\n${hostileLines.join("\n")}\nEOF\nexit 3\n`;
  const engines = {
    hostile: `#!/bin/sh\nif [ "$1" = "--version" ]; then exec ${shardEngine} "$@"; fi\n${hostile}`,
    "hostile-version": `#!/bin/sh\n${hostile}`,
  };
  for (const [name, script] of Object.entries(engines)) {
    const binary = join(world.root, "bin", `${name}.sh`);
    await writeFile(binary, script, { mode: 0o755 });
    const text = definitionText(world, { nodes: ["l1", "l2"], binary, port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) });
    await writeDefinition(world, name, text);
  }
  daemon = await startInProcessDaemon(world);
  url = daemon.uiUrl!;
  browser = await launchChromium();
  // bypassCSP: the test evaluates its probes as strings, which the page's policy (no eval) refuses.
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await daemon?.stop();
  if (world !== undefined) {
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 60_000);

describe("hostile text", () => {
  test("an engine's log lines with markup, a bidi override, ANSI escapes and a long word read as `shardctl status` prints them, within the page", async () => {
    const status = await waitForStatus(world, "hostile", (s) => s.restarts?.evidence.some((e) => e.logTail.some((l) => l.includes("ERROR"))) === true, 60_000);
    const tail = status.restarts!.evidence.find((e) => e.logTail.some((l) => l.includes("ERROR")))!.logTail;
    // The status file holds the engine's bytes as written (a line cut at 400 characters): the page
    // is where they must be defused.
    expect(tail).toEqual(expect.arrayContaining([...hostileLines.slice(0, -1), `${"A".repeat(400)}… (2600 more characters)`]));

    await page.goto(`${url}#/clusters/hostile`);
    const evidence = page.locator(".evidence li").filter({ hasText: "ERROR" }).last();
    await evidence.locator("summary").click();
    const shown = (await evidence.locator("pre").textContent()) ?? "";
    expect(shown).toBe(tail.map((line) => showText(line)).join("\n"));
    expect(shown).toContain("weights from \\u202egpj.exe\\u202c and the rest");
    expect(shown).toContain("\\u001b[31mERROR\\u001b[0m layer 3 failed \\u001b]0;retitled\\u0007");
    // Markup is text: nothing ran, no element was made of it.
    expect(shown).toContain("<script>window.__pwned = 1</script>");
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
    expect(await page.locator("main img, main script").count()).toBe(0);
    // No raw control or bidirectional character anywhere on the page.
    expect(await page.evaluate(rawControlShown)).toBe(false);
    // The long word wraps in its box; the page itself never scrolls sideways, on a desktop or a phone.
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      expect(await page.evaluate("document.documentElement.scrollWidth <= window.innerWidth"), `${width} px`).toBe(true);
    }
    await page.setViewportSize({ width: 1280, height: 900 });
  }, 90_000);

  test("an engine's failed version check, quoted in the last error, reads as `shardctl status` prints it", async () => {
    const status = await waitForStatus(world, "hostile-version", (s) => s.lastError?.reason === "EngineNotFound", 60_000);
    await page.goto(`${url}#/clusters/hostile-version`);
    const line = page.locator(".error-line");
    await line.waitFor();
    expect(await line.textContent()).toContain(showText(status.lastError!.message));
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
    expect(await page.evaluate(rawControlShown)).toBe(false);
  }, 90_000);

  test("a link with broken percent-encoding or markup in its cluster name opens a page that says there is no such cluster", async () => {
    for (const hash of ["#/clusters/%E0%A4%A", "#/clusters/%", "#/clusters/%3Cimg%20src%3Dx%20onerror%3D%22window.__pwned%3D3%22%3E"]) {
      // A fresh load each time: a hash change alone would not run the page's start-up again.
      await page.goto("about:blank");
      const errors: string[] = [];
      const onError = (error: Error): void => void errors.push(error.message);
      page.on("pageerror", onError);
      await page.goto(`${url}${hash}`);
      // Until the daemon's first word, the page says it is waiting for it; then that there is no such cluster.
      await page.locator("[data-testid=no-status]", { hasText: "The daemon has no status of a cluster named" }).waitFor({ timeout: 10_000 });
      expect(await page.locator("main").textContent(), hash).toContain("The daemon has no status of a cluster named");
      expect(errors, hash).toEqual([]);
      page.off("pageerror", onError);
    }
    expect(await page.evaluate("window.__pwned")).toBeUndefined();
    // The link "All clusters" still leads to the list.
    await page.locator("main a", { hasText: "All clusters" }).click();
    await page.locator("tr[data-cluster=hostile]").waitFor();
  }, 60_000);
});
