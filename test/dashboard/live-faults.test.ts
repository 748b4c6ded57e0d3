/**
 * What a person watching the dashboard sees during real faults, in real headless Chromium, never
 * reloaded: a real daemon process (`shardctl daemon`, default health timings, beating every 500 ms)
 * runs a two-stage cluster of the reference engine on two local nodes. A stage's engine is killed
 * (SIGKILL), another is frozen (SIGSTOP): the page must say what the status file says (Not ready,
 * the same reason and message, the member blamed marked dead) and come back to Healthy by itself
 * after the relaunch. The daemon is then frozen (the page must call it silent and grey its word,
 * not go on showing a green Healthy), killed (gone), and restarted (live again, saying so).
 */
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import type { ClusterStatus } from "../../src/reconciler/index.js";
import { launchChromium } from "../support/chromium.js";
import { allocateHost } from "../support/test-world.js";
import {
  definitionText,
  enginePidOf,
  enginesOf,
  freePort,
  freePortRange,
  readStatusFile,
  spawnDaemon,
  startWorld,
  waitForStatus,
  waitWatching,
  writeDefinition,
  writeSettings,
  type DaemonWorld,
  type SpawnedDaemon,
} from "../reconciler/daemon-fixture.js";
import { enableDashboard } from "./support.js";

let world: DaemonWorld;
let daemon: SpawnedDaemon;
let browser: Browser;
let page: Page;
let url: string;
let definition: string;

const badge = `document.querySelector('h1 [data-testid=health-badge]')?.dataset.health`;
const cardStates = `[...document.querySelectorAll('[data-testid=stage-card]')].map((c) => c.dataset.state).join(",")`;
const readyLine = `document.querySelector('[data-testid=ready-line]')`;
const connection = `document.querySelector('[data-testid=connection]')?.dataset.state`;

/** A daemon process on the world's fixed dashboard address; resolves once it watches. */
async function runDaemon(): Promise<SpawnedDaemon> {
  const spawned = await spawnDaemon(world);
  await waitWatching(spawned);
  return spawned;
}

/** Wait until `condition` (browser-side JavaScript) holds in the page; says what the page went through when it does not. */
async function until(condition: string, timeoutMs = 60_000): Promise<void> {
  try {
    await page.waitForFunction(condition, undefined, { timeout: timeoutMs, polling: 100 });
  } catch (error) {
    const seen = await page.evaluate("window.__seen").catch(() => undefined);
    throw new Error(`${String(error)}\npage states seen: ${JSON.stringify(seen, undefined, 1)}`, { cause: error });
  }
}

/** From now on, every state the page shows (health, cards, Ready line, connection), in order, each with the time it showed. */
async function recordPage(): Promise<void> {
  await page.evaluate(`(() => {
    window.__marker = "no reload";
    window.__seen = [];
    const record = () => {
      const line = ${readyLine};
      const entry = { health: ${badge}, cards: ${cardStates}, ready: line?.dataset.status, text: line?.textContent, connection: ${connection} };
      const last = window.__seen.at(-1);
      if (last === undefined || JSON.stringify({ ...last, at: 0 }) !== JSON.stringify({ ...entry, at: 0 })) window.__seen.push({ ...entry, at: Date.now() });
    };
    new MutationObserver(record).observe(document.body, { subtree: true, childList: true, attributes: true, characterData: true });
    record();
  })()`);
}

interface Seen {
  health: string;
  cards: string;
  ready: string | undefined;
  text: string | undefined;
  connection: string;
  at: number;
}

type Ready = Pick<ClusterStatus["conditions"][number], "status" | "reason" | "message">;

/**
 * Every Ready condition the cluster's status file has said so far: the versions the audit read,
 * and the daemon's log of each change it wrote (a version replaced within milliseconds — a death,
 * then the same death with its exit status — is gone before a loaded machine's watcher reads it).
 */
function writtenReady(): { read: Ready[]; logged: Ready[] } {
  const read = world.audit.statusesOf("live").flatMap((s) => s.conditions.filter((c) => c.type === "Ready"));
  const logged = daemon
    .stderr()
    .split("\n")
    .flatMap((line) => {
      try {
        const entry = JSON.parse(line) as { msg?: string; cluster?: string; ready?: Ready };
        return entry.msg === "the status file's Ready changed" && entry.cluster === "live" && entry.ready !== undefined ? [entry.ready] : [];
      } catch {
        return [];
      }
    });
  return { read, logged };
}

beforeAll(async () => {
  world = await startWorld();
  // Beats every 500 ms: the page calls a frozen daemon silent after 4 missed beats (at least 3 s).
  await writeSettings(world, { enabled: true, restartBudget: 10, heartbeatSeconds: 0.5 });
  // A fixed address (a leased loopback host, a free port on it): the page finds a restarted daemon there.
  const host = await allocateHost();
  const port = await freePort(host);
  await enableDashboard(world, { address: `${host}:${port}` });
  url = `http://${host}:${port}/`;
  definition = definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) });
  await writeDefinition(world, "live", definition);
  daemon = await runDaemon();
  browser = await launchChromium();
  // bypassCSP: the test evaluates its probes as strings, which the page's policy (no eval) refuses.
  page = await browser.newPage({ viewport: { width: 1280, height: 900 }, bypassCSP: true });
  await page.goto(`${url}#/clusters/live`);
  await until(`${badge} === "Healthy" && ${cardStates} === "healthy,healthy"`, 90_000);
  await recordPage();
}, 180_000);

afterAll(async () => {
  await browser?.close();
  if (world !== undefined) {
    // Stop the cluster through the daemon, then the daemon.
    if (daemon?.child.exitCode === null && daemon.child.signalCode === null) {
      await writeDefinition(world, "live", definition.replace('desired = "running"', 'desired = "stopped"'));
      await waitForStatus(world, "live", (s) => s.health === "Stopped", 60_000).catch(() => undefined);
      daemon.child.kill("SIGTERM");
      await daemon.exited;
    }
    expect(await enginesOf(world)).toEqual([]);
    await world.close();
  }
}, 120_000);

describe("faults as the page shows them, live", () => {
  for (const [signal, index] of [
    ["SIGKILL", 1],
    ["SIGSTOP", 0],
  ] as const) {
    test(`${signal} of stage-${index}'s engine: the page says Not ready with the status file's words, marks stage-${index} dead, and is Healthy again after the relaunch`, async () => {
      const running = await waitForStatus(world, "live", (s) => s.health === "Healthy" && s.stages.length === 2 && s.stages.every((x) => x.alive));
      await page.evaluate("window.__seen = window.__seen.slice(-1)");
      const pid = await enginePidOf(running.stages[index]!.pid!);
      const at = Date.now();
      process.kill(pid, signal);
      await until(`window.__seen.some((s) => s.ready === "False" && s.cards.split(",")[${index}] === "dead")`);
      await until(`${badge} === "Healthy" && ${cardStates} === "healthy,healthy" && ${readyLine}?.dataset.status === "True"`, 90_000);
      const seen = (await page.evaluate("window.__seen")) as Seen[];
      const shown = seen.find((s) => s.ready === "False" && s.cards.split(",")[index] === "dead")!;
      // The figure for people (not asserted: no timed assertions): how long the page took to say it.
      console.log(`${signal} stage-${index}: the page said Not ready ${shown.at - at} ms after the signal`);
      expect(await page.evaluate("window.__marker")).toBe("no reload");
      // Every Not ready the page showed is, word for word, a Ready=False the daemon wrote to the status file.
      // The page hears a status as it is composed; its file write, the audit's read of it and the
      // daemon's log line of it follow (on a loaded machine, by a moment): they are waited for.
      const notReady = seen.filter((x) => x.ready === "False");
      const allWritten = (): boolean => {
        const { read, logged } = writtenReady();
        return notReady.every((s) => [...read, ...logged].some((c) => c.status === "False" && s.text === `Not ready: ${c.reason} ${c.message}`));
      };
      for (const deadline = Date.now() + 15_000; !allWritten() && Date.now() < deadline;) await new Promise((r) => setTimeout(r, 100));
      const { read, logged } = writtenReady();
      const written = [...read, ...logged];
      // The daemon's log has each change the file said, the death as the page showed it among them.
      expect(logged.some((c) => c.status === "False" && shown.text === `Not ready: ${c.reason} ${c.message}`)).toBe(true);
      for (const s of seen.filter((x) => x.ready === "False")) {
        const match = written.some((c) => c.status === "False" && s.text === `Not ready: ${c.reason} ${c.message}`);
        expect(match, `${s.text}\nwritten: ${JSON.stringify(written)}`).toBe(true);
      }
      // The death names the member signalled first, and the page marked its card.
      expect(shown.text).toMatch(new RegExp(`^Not ready: \\w+ stage-${index} on l${index + 1}\\b`));
      // Never a frame that showed Healthy with a dead card, or Ready with the cluster down.
      expect(seen.filter((s) => s.health === "Healthy" && s.cards.includes("dead"))).toEqual([]);
      expect(seen.at(-1)).toMatchObject({ health: "Healthy", cards: "healthy,healthy", ready: "True", connection: "live" });
      const after = await readStatusFile(world, "live");
      expect(after?.stages.map((s) => s.pid)).not.toContain(running.stages[index]!.pid);
    }, 150_000);
  }

  test("a frozen daemon: the page calls it silent and greys its Healthy, then live again when it resumes", async () => {
    await until(`${badge} === "Healthy" && ${connection} === "live"`);
    daemon.child.kill("SIGSTOP");
    try {
      await until(`${connection} === "silent"`, 30_000);
      expect(await page.locator("[data-testid=connection]").textContent()).toContain("silent");
      // The last word stays on screen, greyed and said to be old; nothing can be asked of it.
      expect(await page.locator("article").getAttribute("class")).toContain("stale");
      expect(await page.locator("[data-testid=reconcile]").getAttribute("aria-disabled")).toBe("true");
      // The tab says it too, for a person looking at another tab.
      expect(await page.title()).toBe("(daemon silent) live · shardctl");
    } finally {
      daemon.child.kill("SIGCONT");
    }
    await until(`${connection} === "live"`, 30_000);
    expect(await page.locator("article").getAttribute("class")).toBeNull();
    expect(await page.title()).toBe("live · shardctl");
    expect(await page.evaluate("window.__marker")).toBe("no reload");
  }, 90_000);

  test("a daemon killed and restarted: gone meanwhile, then live again saying it restarted, the cluster adopted Healthy", async () => {
    daemon.child.kill("SIGKILL");
    await daemon.exited;
    await until(`${connection} === "gone"`, 15_000);
    expect(await page.locator("[data-testid=connection]").textContent()).toContain("The daemon is gone");
    expect(await page.locator("article").getAttribute("class")).toContain("stale");
    expect(await page.title()).toBe("(daemon gone) live · shardctl");
    daemon = await runDaemon();
    await until(`${connection} === "live"`, 30_000);
    expect(await page.locator("[data-testid=connection]").textContent()).toContain("restarted");
    await until(`${badge} === "Healthy" && ${cardStates} === "healthy,healthy"`, 60_000);
    expect(await page.evaluate("window.__marker")).toBe("no reload");
  }, 120_000);
});
