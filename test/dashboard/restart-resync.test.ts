/**
 * A restarted daemon serves the status files an earlier daemon wrote until its own first pass of
 * each cluster composes a fresh one; with the queue busy that takes seconds, and meanwhile the page
 * must not show the old word as current. A real daemon (in this process) brings "zz" to Healthy on
 * two local nodes and stops without tearing it down; its stage engines are killed while no daemon
 * runs; a second daemon on the same address starts. Its first pass of each cluster plans it first,
 * and the clusters' engine answers `--version` after 6 s from the restart on, so that pass takes that long. The page, open all along in real Chromium, shows the
 * file's Healthy only marked as not yet checked by the daemon that now runs, then the truth. A
 * status file that cannot be read when the daemon restarts does not take its cluster off the list:
 * the row stays, marked the same way, until the daemon's first pass of it.
 */
import { rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { pino } from "pino";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, test } from "vitest";
import { bundledShardEngineCommand } from "../../src/launch/index.js";
import { startDaemon, type Daemon } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import {
  definitionText,
  enginePidOf,
  enginesOf,
  fastLaunch,
  fastMonitor,
  freePort,
  freePortRange,
  readStatusFile,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
} from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

let world: DaemonWorld;
let daemon: Daemon | undefined;
let browser: Browser;
let page: Page;

function runDaemon(teardownOnExit = false): Promise<Daemon> {
  const log = pino({ level: "debug" }, pino.destination({ dest: join(world.root, "daemon.log"), sync: true }));
  return startDaemon({
    dir: world.clustersDir,
    settingsFile: world.settingsFile,
    log,
    resyncMs: 60_000,
    debounceMs: 50,
    launchDeadlines: fastLaunch,
    monitor: fastMonitor,
    teardownOnExit,
  });
}

beforeAll(async () => {
  world = await startWorld();
  await writeSettings(world, { enabled: true, restartBudget: 1 });
  // A fixed address: the page finds the second daemon where the first one was.
  await enableDashboard(world, { address: `127.0.0.1:${await freePort()}` });
  browser = await launchChromium();
  // bypassCSP: the test evaluates its probes as strings, which the page's policy (no eval) refuses.
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
}, 120_000);

afterAll(async () => {
  await browser?.close();
  await daemon?.stop();
  if (world !== undefined) {
    const last = await runDaemon(true).catch(() => undefined);
    await last?.whenIdle();
    await last?.stop();
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 120_000);

test("after a daemon restart the page marks a status file not yet checked by the new daemon, until its pass says the truth", async () => {
  await writeDefinition(
    world,
    "zz",
    definitionText(world, { nodes: ["l1", "l2"], binary: await slowVersionEngine(), port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) }),
  );
  daemon = await runDaemon();
  const url = daemon.uiUrl!;
  await waitForStatus(world, "zz", (s) => s.health === "Healthy");
  await page.goto(`${url}#/clusters/zz`);
  await page.waitForFunction(`document.querySelector('h1 [data-testid=health-badge]')?.dataset.health === "Healthy"`, undefined, { timeout: 30_000 });
  // Every state the page shows from now on: connection, badge, and the "not checked yet" mark.
  await page.evaluate(`(() => {
    window.__seen = [];
    const record = () => {
      const entry = [
        document.querySelector("[data-testid=connection]")?.dataset.state,
        document.querySelector("h1 [data-testid=health-badge]")?.dataset.health,
        document.querySelector("[data-testid=unchecked]") === null ? "checked" : "unchecked",
      ].join("|");
      if (window.__seen.at(-1) !== entry) window.__seen.push(entry);
    };
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    record();
  })()`);

  // The daemon stops and leaves zz running (no teardown); then zz's engines die behind its back.
  await daemon.stop();
  daemon = undefined;
  const healthy = (await readStatusFile(world, "zz"))!;
  expect(healthy.health).toBe("Healthy");
  // An engine already gone (its stage's own exit as the daemon stopped, on a loaded machine) is as
  // good: what matters is that none runs when the new daemon starts.
  for (const stage of healthy.stages) killUnlessGone(await enginePidOf(stage.pid!));
  await writeFile(slowVersionFlag(), "");
  daemon = await runDaemon();
  await page.waitForFunction(`document.querySelector("[data-testid=connection]")?.dataset.state === "live"`, undefined, { timeout: 30_000 });
  // The new daemon's own word: zz is not Healthy (its engines are gone).
  await waitForStatus(world, "zz", (s) => s.health !== "Healthy" && s.history.length > healthy.history.length, 45_000);
  await page.waitForFunction(`document.querySelector('h1 [data-testid=health-badge]')?.dataset.health !== "Healthy"`, undefined, { timeout: 30_000 });
  const seen = (await page.evaluate("window.__seen")) as string[];
  const afterRestart = seen.slice(seen.findIndex((s) => s.startsWith("gone")));
  // The file's Healthy was on the page while the new daemon was live (the window this is about)…
  const staleLive = afterRestart.filter((s) => s.startsWith("live|Healthy"));
  expect(staleLive.length, seen.join(" → ")).toBeGreaterThan(0);
  // …and never without the mark; the daemon's own status clears it.
  expect(
    staleLive.every((s) => s.endsWith("|unchecked")),
    seen.join(" → "),
  ).toBe(true);
  expect(seen.at(-1), seen.join(" → ")).toMatch(/^live\|\w+\|checked$/);
  await rm(slowVersionFlag(), { force: true });
}, 120_000);

function killUnlessGone(pid: number): void {
  try {
    process.kill(pid, "SIGKILL");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "ESRCH") throw error;
  }
}

/** While it exists, the engine of slowVersionEngine answers `--version` after 6 s. */
function slowVersionFlag(): string {
  return join(world.root, "slow-version");
}

/**
 * The bundled engine, but for `--version`, which it answers after 6 s while slowVersionFlag exists:
 * a daemon's first pass of a cluster (which plans it) then takes that long. The flag is set just
 * before the daemon restarts, so only the restarted daemon's first pass (the window under test) is
 * slow, not the first launch.
 */
async function slowVersionEngine(): Promise<string> {
  const path = join(world.root, "slow-version-engine.sh");
  const engine = bundledShardEngineCommand.map((arg) => JSON.stringify(arg)).join(" ");
  const flag = JSON.stringify(slowVersionFlag());
  await writeFile(path, `#!/bin/sh\ncase " $* " in *" --version "*) [ -e ${flag} ] && sleep 6 ;; esac\nexec ${engine} "$@"\n`, { mode: 0o755 });
  return path;
}

test("a status file unreadable at a daemon restart keeps its cluster's row, marked not checked, until the daemon's pass", async () => {
  // Its own daemon, whatever the test before left (it stops and restarts one).
  daemon ??= await runDaemon();
  await writeDefinition(
    world,
    "zy",
    definitionText(world, { nodes: ["l1", "l2"], binary: await slowVersionEngine(), port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) }),
  );
  await waitForStatus(world, "zy", (s) => s.health === "Healthy");
  const url = daemon!.uiUrl!;
  await page.goto(url);
  await page.locator("tr[data-cluster=zy]").waitFor({ timeout: 30_000 });
  // Every state of the list from now on: connection, and zy's row (absent, or its health and mark).
  await page.evaluate(`(() => {
    window.__rows = [];
    const record = () => {
      const row = document.querySelector("tr[data-cluster=zy]");
      const entry = [
        document.querySelector("[data-testid=connection]")?.dataset.state,
        row === null ? "absent" : row.querySelector("[data-testid=health-badge]")?.dataset.health,
        row?.querySelector("[data-testid=unchecked-tag]") == null ? "checked" : "unchecked",
      ].join("|");
      if (window.__rows.at(-1) !== entry) window.__rows.push(entry);
    };
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    record();
  })()`);
  await daemon!.stop();
  daemon = undefined;
  // Cut short (as a full disk or a hand edit leaves it): the next daemon cannot read it.
  await writeFile(join(world.clustersDir, "zy.status.json"), '{"cluster": "zy", "heal');
  await writeFile(slowVersionFlag(), "");
  daemon = await runDaemon();
  // Any status that reads is the new daemon's (it wrote over the cut one).
  await waitForStatus(world, "zy", () => true, 45_000);
  await page.waitForFunction(`window.__rows.at(-1)?.endsWith("|checked") && window.__rows.at(-1)?.startsWith("live|")`, undefined, { timeout: 30_000 });
  const rows = (await page.evaluate("window.__rows")) as string[];
  const afterRestart = rows.slice(rows.findIndex((s) => s.startsWith("gone")));
  // The row never left the list, and while live it was marked until the daemon's own status came.
  expect(
    afterRestart.filter((s) => s.includes("|absent|")),
    rows.join(" → "),
  ).toEqual([]);
  const live = afterRestart.filter((s) => s.startsWith("live|"));
  expect(live[0], rows.join(" → ")).toMatch(/\|unchecked$/);
  expect(live.at(-1), rows.join(" → ")).toMatch(/\|checked$/);
  await rm(slowVersionFlag(), { force: true });
}, 120_000);
