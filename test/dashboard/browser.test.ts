/**
 * The dashboard end to end in real headless Chromium (Debian's chromium, driven by playwright-core):
 * a daemon in this process launches the demo-shaped cluster (two stages, the reference engine) on
 * two real sshd nodes, its model pushed to them and its definition committed; the page shows the
 * plan and memory-fit bars, the staging bytes, both commits, the launch timeline and two healthy
 * stage cards; a kill -9 of a stage's engine turns its card and the badge unhealthy and back to healthy
 * after the relaunch, without a reload; "Reconcile now" is refused with a wrong token and taken
 * with the right one; the page says so when the daemon stops and comes back live when it restarts.
 * Screenshots go to test-artifacts/dashboard/ (gitignored); with UPDATE_DOCS_SCREENSHOT=1 the light
 * cluster page also to docs/dashboard.png, the README's picture.
 */
import { copyFile, mkdir } from "node:fs/promises";
import { join, relative } from "node:path";
import { pino } from "pino";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startDaemon, type ClusterStatus, type Daemon } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { allocateHost } from "../support/test-world.js";
import {
  commitDefinition,
  definitionText,
  enginePidOf,
  enginesOf,
  fastLaunch,
  fastMonitor,
  freePort,
  freePortRange,
  repoRoot,
  startWorld,
  waitForStatus,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

const tokenEnv = "SHARDCTL_TEST_BROWSER_TOKEN";
const token = "browser-test-token-7f3a9c";
const artefacts = join(repoRoot, "test-artifacts/dashboard");

let world: DaemonWorld;
let daemon: Daemon;
let browser: Browser;
let page: Page;
let url: string;
/** The commit that holds the demo definition: the status's definition commit and checkout alike. */
let commit: string;

/** The daemon in this process; `teardownOnExit` for the last one, so the test leaves nothing running. */
function runDaemon(teardownOnExit = false): Promise<Daemon> {
  const log = pino({ level: "debug" }, pino.destination({ dest: join(world.root, "daemon.log"), sync: true }));
  return startDaemon({
    dir: world.clustersDir,
    settingsFile: world.settingsFile,
    log,
    resyncMs: 2_000,
    debounceMs: 50,
    launchDeadlines: fastLaunch,
    monitor: fastMonitor,
    teardownOnExit,
  });
}

async function shot(name: string): Promise<string> {
  const path = join(artefacts, `${name}.png`);
  await page.screenshot({ path, fullPage: true });
  return path;
}

/** Wait until `condition` (browser-side JavaScript) holds in the page. */
async function until(condition: string, timeoutMs = 45_000): Promise<void> {
  try {
    await page.waitForFunction(condition, undefined, { timeout: timeoutMs, polling: 100 });
  } catch (error) {
    const seen = await page.evaluate("window.__seen").catch(() => undefined);
    const status = await fetch(new URL("api/clusters/demo", url)).then((r) => r.text(), String);
    throw new Error(`${String(error)}\npage states seen: ${JSON.stringify(seen)}\nstatus: ${status.slice(0, 3000)}`, { cause: error });
  }
}

const cardStates = `[...document.querySelectorAll('[data-testid=stage-card]')].map((c) => c.dataset.state).join(",")`;
const badge = `document.querySelector('h1 [data-testid=health-badge]')?.dataset.health`;

beforeAll(async () => {
  await mkdir(artefacts, { recursive: true });
  process.env[tokenEnv] = token;
  world = await startWorld({ sshNodes: 2 });
  // Budgets of 512 KiB / 1.2 headroom: the tiny model's weights and KV cache show in the memory-fit bars (a real node's GiB would dwarf them).
  await writeSettings(world, { restartBudget: 5, nodeMemory: "512KiB" });
  // A fixed address (a leased loopback host and a free port on it): the page finds a restarted daemon there.
  const host = await allocateHost();
  await enableDashboard(world, { address: `${host}:${await freePort(host)}`, tokenEnv });
  const hosts = ["127.0.0.1", ...world.hosts.values()];
  // The coordinator outlives a broken pipeline by 2 s: the first death the daemon sees is a stage's.
  const extraArgs = ["--connect-timeout-ms", "5000", "--broken-exit-delay-ms", "2000"];
  // Source "push": the daemon copies the model to each node (staging bars with bytes), named by its
  // path relative to the settings file as a person would write it. Committed, so the commits show.
  const text = definitionText(world, {
    nodes: ["n1", "n2"],
    port: await freePort(),
    portRange: await freePortRange(hosts),
    extraArgs,
    modelId: relative(world.root, world.modelDir),
    modelSource: "push",
  });
  commit = await commitDefinition(world, "demo", text);
  daemon = await runDaemon();
  url = daemon.uiUrl!;
  browser = await launchChromium();
  // bypassCSP: the test evaluates its probes as strings, which the page's policy (no eval) refuses.
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, colorScheme: "light", bypassCSP: true });
}, 600_000);

afterAll(async () => {
  await browser?.close();
  await daemon?.stop();
  // Tear the cluster down: a daemon that tears down on exit, once it has adopted what runs.
  if (world !== undefined) {
    const last = await runDaemon(true).catch(() => undefined);
    await last?.whenIdle();
    await last?.stop();
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
  delete process.env[tokenEnv];
}, 120_000);

/**
 * The least contrast between a text and what it is drawn on, over every element under `selector`
 * that holds text of its own (WCAG's relative luminance; the background is the nearest opaque one).
 */
async function lowestContrast(selector: string): Promise<{ ratio: number; text: string }> {
  // Evaluated in the page (a string: the tests' TypeScript has no DOM types).
  return page.evaluate(`(() => {
    const rgb = (css) => (css.match(/[\\d.]+/g) ?? []).map(Number);
    const linear = (c) => (c / 255 <= 0.03928 ? c / 255 / 12.92 : ((c / 255 + 0.055) / 1.055) ** 2.4);
    const luminance = ([r, g, b]) => 0.2126 * linear(r) + 0.7152 * linear(g) + 0.0722 * linear(b);
    const backgroundOf = (element) => {
      for (let at = element; at !== null; at = at.parentElement) {
        const [r, g, b, a = 1] = rgb(getComputedStyle(at).backgroundColor);
        if (a > 0) return [r, g, b];
      }
      return [255, 255, 255];
    };
    let lowest = { ratio: Infinity, text: "" };
    for (const root of document.querySelectorAll(${JSON.stringify(selector)}))
      for (const element of root.querySelectorAll("*")) {
        const own = [...element.childNodes].filter((n) => n.nodeType === Node.TEXT_NODE && n.textContent.trim() !== "").map((n) => n.textContent.trim());
        if (own.length === 0) continue;
        const [a, b] = [luminance(rgb(getComputedStyle(element).color)), luminance(backgroundOf(element))];
        const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        if (ratio < lowest.ratio) lowest = { ratio, text: own.join(" ") };
      }
    return lowest;
  })()`);
}

describe("the dashboard in Chromium", () => {
  test("the cluster page: plan bars, launch timeline, two healthy stage cards", async () => {
    await page.goto(`${url}#/clusters/demo`);
    await until(`${badge} === "Healthy" && ${cardStates} === "healthy,healthy"`, 90_000);
    expect(await page.locator("[data-testid=layer-bar] .layer-segment").count()).toBe(2);
    expect(await page.locator("[data-testid=fit-row]").count()).toBe(2);
    expect(await page.locator("[data-testid=layer-bar]").getAttribute("aria-label")).toMatch(
      /^4 layers over 2 stages: stage 0 on n1: layers 0 to 1 \(2\); stage 1 on n2: layers 2 to 3 \(2\)$/,
    );
    expect(await page.locator("[data-testid=timeline] .timeline-segment").count()).toBeGreaterThanOrEqual(4);
    const steps = await page.locator("[data-testid=timeline] .timeline-list strong").allTextContents();
    expect(steps[0]).toBe("launch-started");
    expect(steps).toContain("coordinator-healthy");
    expect(steps.at(-1)).toBe("ready");
    // The labels on the plan's and the timeline's coloured segments are readable: WCAG AA, 4.5:1.
    const contrast = await lowestContrast("[data-testid=layer-bar], [data-testid=timeline]");
    expect(contrast.ratio, `"${contrast.text}"`).toBeGreaterThanOrEqual(4.5);
    expect(await page.locator("[data-testid=connection]").getAttribute("data-state")).toBe("live");
    // The model was pushed to both nodes (and the coordinator's, for the files it reads): each
    // staging row says how many bytes the node holds.
    const staging = await page.locator("[data-testid=staging-row]").allTextContents();
    expect(staging.map((row) => row.split(" ")[0]).sort()).toEqual(["local", "n1", "n2"]);
    for (const row of staging) expect(row).toMatch(/^\S+ present · ([\d.]+ (?:[KMG]i)?B) of \1$/);
    // Both commits, labelled as `shardctl status` labels them.
    const short = commit.slice(0, 12);
    expect(await page.locator("[data-testid=cluster-facts]").textContent()).toContain(`definition commit ${short} · checkout at ${short}`);
    const light = await shot("cluster-light");
    // The README's picture: refreshed on demand only, so an ordinary test run leaves the tree clean.
    if (process.env.UPDATE_DOCS_SCREENSHOT === "1") await copyFile(light, join(repoRoot, "docs/dashboard.png"));
    await page.emulateMedia({ colorScheme: "dark" });
    await shot("cluster-dark");
    await page.emulateMedia({ colorScheme: "light" });
  }, 120_000);

  test("the clusters list: one row with the Cluster badge, its health, stages up/total; the health filter", async () => {
    await page.goto(`${url}#/`);
    const row = page.locator("tr[data-cluster=demo]");
    await row.waitFor();
    expect(await row.locator("[data-testid=health-badge]").getAttribute("data-health")).toBe("Healthy");
    expect(await row.textContent()).toMatch(/Cluster.*Healthy.*2\/2.*http:\/\/127\.0\.0\.1:\d+/);
    // The commits in short, each explained by its title.
    const commits = row.locator("[data-testid=commits]");
    expect(await commits.textContent()).toBe(`commit ${commit.slice(0, 7)} · checkout ${commit.slice(0, 7)}`);
    expect(await commits.locator("[title]").evaluateAll((spans) => spans.map((s) => s.getAttribute("title")))).toEqual([
      `definition commit ${commit}: the last commit that touched demo.toml`,
      `checkout at ${commit}: the commit the daemon's checkout of the definitions is at (HEAD)`,
    ]);
    await shot("clusters");
    await page.locator("[data-testid=health-filter]").selectOption("Unhealthy");
    expect(await row.count()).toBe(0);
    await page.locator("[data-testid=health-filter]").selectOption("Healthy");
    expect(await row.count()).toBe(1);
    // Keyboard: the row's link is reachable and opens the cluster page.
    await row.locator("a").focus();
    await page.keyboard.press("Enter");
    await page.locator("#cluster-title").waitFor();
    // It opens at its top, its title and health in view below the sticky header, and the focus on its content.
    expect(await page.evaluate("window.scrollY")).toBe(0);
    expect(await page.evaluate(`document.activeElement?.id`)).toBe("main");
    const [header, title] = await Promise.all([page.locator("header").first().boundingBox(), page.locator("#cluster-title").boundingBox()]);
    expect(title!.y).toBeGreaterThanOrEqual(header!.y + header!.height);
  });

  test("kill -9 of a stage: its card and the badge turn unhealthy, then healthy after the relaunch, without a reload", async () => {
    await page.goto(`${url}#/clusters/demo`);
    await until(`${cardStates} === "healthy,healthy"`);
    // Every state the page shows from now on, in order, and a marker a reload would lose.
    await page.evaluate(`(() => {
      window.__marker = "no reload";
      window.__seen = [];
      const record = () => {
        const entry = ${badge} + "|" + ${cardStates};
        if (window.__seen.at(-1) !== entry) window.__seen.push(entry);
      };
      new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
      record();
    })()`);
    const before = (await (await fetch(new URL("api/clusters/demo", url))).json()) as ClusterStatus;
    const killed = await enginePidOf(before.stages[1]!.pid!);
    process.kill(killed, "SIGKILL");
    // The killed stage's card is marked dead: the death names it, whichever exit the daemon saw first
    // (stage-0 exits as its link to it closes, and is named after it when its exit was seen first).
    // The badge says what the status says: Unhealthy at the death, then Progressing while the
    // relaunch runs (a relaunch may follow within milliseconds, before a frame shows Unhealthy).
    const deathShown = (s: string): boolean => {
      const [health, cards] = s.split("|") as [string, string];
      return health !== "Healthy" && cards.split(",")[1] === "dead";
    };
    await until(`window.__seen.some(${deathShown.toString()})`);
    await shot("cluster-after-kill");
    await until(`${badge} === "Healthy" && ${cardStates} === "healthy,healthy"`, 90_000);
    const seen = (await page.evaluate("window.__seen")) as string[];
    const dead = seen.findIndex(deathShown);
    expect(seen[0]).toBe("Healthy|healthy,healthy");
    expect(dead).toBeGreaterThan(0);
    // No frame blamed stage-0 alone: it died only because the killed stage did.
    expect(seen.filter((s) => /\|dead,(?!dead)/.test(s))).toEqual([]);
    expect(seen.at(-1)).toBe("Healthy|healthy,healthy");
    expect(await page.evaluate("window.__marker")).toBe("no reload");
    const after = await waitForStatus(world, "demo", (s) => s.health === "Healthy" && s.stages.every((x) => x.alive));
    expect(after.stages[1]!.pid).not.toBe(before.stages[1]!.pid);
    expect(after.restarts?.evidence.at(-1)?.reason).toBe("StageDied");
    expect(after.restarts?.evidence.at(-1)?.message).toMatch(/^stage-1 on \S+: pid \d+ (exited|is no longer running) \(killed by SIGKILL \(status 137\)\)/);
    await page.locator("text=Restarts").scrollIntoViewIfNeeded();
    await shot("cluster-relaunched");
  }, 150_000);

  test('"Reconcile now" asks for the token, is refused with a wrong one and taken with the right one', async () => {
    await page.locator("[data-testid=reconcile]").click();
    const dialog = page.locator("[data-testid=token-dialog]");
    await dialog.waitFor({ state: "visible" });
    await page.locator("[data-testid=token-input]").fill("not-the-token");
    await page.keyboard.press("Enter");
    await page.locator("[data-testid=token-dialog] [role=alert]").waitFor();
    expect(await page.locator("[data-testid=token-dialog] [role=alert]").textContent()).toContain("refused");
    await shot("reconcile-token-refused");
    await page.locator("[data-testid=token-input]").fill(token);
    await page.keyboard.press("Enter");
    await until(`document.querySelector("[data-testid=reconcile-note]").textContent.includes("took the request")`, 30_000);
    expect(await dialog.isVisible()).toBe(false);
    // The keyboard's place is kept: the button it pressed, not the page's top.
    expect(await page.evaluate(`document.activeElement?.dataset.testid ?? document.activeElement?.tagName`)).toBe("reconcile");
    // The daemon took it: its status says a pass was asked with a fresh budget, then converges again.
    await waitForStatus(world, "demo", (s) => s.restarts?.count === 1 || s.conditions.some((c) => c.reason === "RetryRequested"));
    await until(`${badge} === "Healthy"`, 60_000);
  }, 120_000);

  test("the plan preview plans a pasted definition read-only", async () => {
    await page.goto(`${url}#/plan`);
    const text = definitionText(world, { nodes: ["n2", "n1"], port: 8080 });
    await page.locator("[data-testid=preview-toml]").fill(text);
    // The name it is planned as must be a cluster name: the browser itself holds the form back.
    const nameField = page.locator("[data-testid=preview-name]");
    const mismatch = (): Promise<boolean> => nameField.evaluate((el) => (el as unknown as { validity: { patternMismatch: boolean } }).validity.patternMismatch);
    for (const bad of ["Bad Name!", "-lead", "a".repeat(64)]) {
      await nameField.fill(bad);
      expect(await mismatch(), bad).toBe(true);
    }
    await nameField.fill("preview-2");
    expect(await mismatch()).toBe(false);
    await page.locator("[data-testid=preview-submit]").click();
    await page.locator("[data-testid=preview-result] [data-testid=layer-bar]").waitFor();
    expect(await page.locator("[data-testid=preview-result] [data-testid=layer-bar]").getAttribute("aria-label")).toContain("stage 0 on n2");
    expect(await page.locator("[data-testid=preview-result] h2").textContent()).toContain("feasible");
    await shot("plan-preview");
  });

  test("until the daemon's first word a cluster page waits for it, rather than saying the cluster does not exist", async () => {
    const fresh = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    try {
      let release!: () => void;
      const held = new Promise<void>((resolve) => (release = resolve));
      await fresh.route("**/api/events", async (route) => {
        await held;
        await route.continue();
      });
      await fresh.goto(`${url}#/clusters/demo`);
      const note = fresh.locator("[data-testid=no-status]");
      await note.waitFor();
      expect(await note.textContent()).toMatch(/^Waiting for the daemon to send the status of “demo”…/);
      release();
      await fresh.locator("#cluster-title").waitFor();
      // Once it has spoken, a name it does not know is said to be unknown.
      await fresh.goto(`${url}#/clusters/nosuch`);
      await fresh.waitForFunction(
        `(document.querySelector("[data-testid=no-status]")?.textContent ?? "").startsWith("The daemon has no status of a cluster named “nosuch”")`,
        undefined,
        {
          timeout: 15_000,
        },
      );
    } finally {
      await fresh.close();
    }
  });

  test("the page says when the daemon is gone, and comes back live when it restarts", async () => {
    await page.goto(`${url}#/clusters/demo`);
    await until(`${badge} === "Healthy"`);
    await daemon.stop();
    await until(`document.querySelector("[data-testid=connection]").dataset.state === "gone"`, 15_000);
    expect(await page.locator("[data-testid=connection]").textContent()).toContain("The daemon is gone");
    expect(await page.locator("[data-testid=reconcile]").getAttribute("aria-disabled")).toBe("true");
    await shot("daemon-gone");
    daemon = await runDaemon();
    await until(`document.querySelector("[data-testid=connection]").dataset.state === "live"`, 30_000);
    expect(await page.locator("[data-testid=connection]").textContent()).toContain("restarted");
    await until(`${badge} === "Healthy" && ${cardStates} === "healthy,healthy"`, 60_000);
  }, 120_000);
});
