/**
 * `npm run bench -- dashboard [--samples N] [--passes N] [--clients N]`: the dashboard's figures.
 *   - bundle: bytes of the built page (dist/ui), raw and gzipped (level 9, as the daemon serves it).
 *   - first paint in headless Chromium (Debian's chromium through playwright-core), median of N cold
 *     loads (default 10, a fresh browser context each): first-contentful-paint, and the moment the
 *     clusters table shows its first row (data from the event stream). Baseline: a one-line HTML page
 *     served by a bare node:http server on the same loopback, loaded the same way.
 *   - a reconcile pass with C event-stream clients connected (default 100, in a separate process, as
 *     browsers are) vs none, in three alternating rounds: median duration of N passes (default 30)
 *     that each write a new status (an edit → a new revision → plan → status → every client): wall
 *     time and this process's CPU time (the clients compete for the same two cores, which inflates
 *     the wall time but not the daemon's own work), their ratios, and the CPU ms one client adds.
 *   - a stage's death on the page's stream: kill -9 of a stage engine (two local nodes, the reference
 *     engine, the daemon's default monitor) → the Unhealthy status event, median and worst of K kills
 *     (default 5); goal ≤ 1000 ms.
 */
import { fork } from "node:child_process";
import { readdir, readFile, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { pino } from "pino";
import { createNodePool } from "../src/cluster/index.js";
import { defaultAssetsDir, startDashboard, type Dashboard } from "../src/dashboard/index.js";
import { dashboardSource } from "../src/reconciler/dashboard-source.js";
import { Reconciler, startDaemon } from "../src/reconciler/index.js";
import { loadSettings } from "../src/spec/index.js";
import { launchChromium } from "../test/support/chromium.js";
import {
  definitionText,
  enginePidOf,
  freePort,
  freePortRange,
  sleep,
  startInProcessDaemon,
  startWorld,
  waitForStatus,
  writeDefinition,
  writeSettings,
} from "../test/reconciler/daemon-fixture.js";
import { enableDashboard, SseReader } from "../test/dashboard/support.js";

export async function run(args: string[]): Promise<object> {
  const samples = intArg(args, "--samples", 10);
  const passes = intArg(args, "--passes", 30);
  const clients = intArg(args, "--clients", 100);
  const kills = intArg(args, "--kills", 5);
  return {
    bundle: await measureBundle(),
    firstPaint: await measureFirstPaint(samples),
    passWithClients: await measurePassWithClients(passes, clients),
    deathToStream: await measureDeathToStream(kills),
  };
}

/** Every file of the built page, raw and gzipped. */
async function measureBundle(): Promise<object> {
  const files = (await readdir(defaultAssetsDir, { recursive: true, withFileTypes: true })).filter((f) => f.isFile());
  if (files.length === 0) throw new Error(`${defaultAssetsDir} is empty: run npm run build`);
  const sizes: Record<string, { bytes: number; gzipBytes: number }> = {};
  for (const f of files) {
    const body = await readFile(join(f.parentPath, f.name));
    const kind = f.name.endsWith(".js") ? "js" : f.name.endsWith(".css") ? "css" : f.name.endsWith(".html") ? "html" : "other";
    const entry = (sizes[kind] ??= { bytes: 0, gzipBytes: 0 });
    entry.bytes += body.length;
    entry.gzipBytes += gzipSync(body, { level: 9 }).length;
  }
  const total = Object.values(sizes).reduce((a, s) => ({ bytes: a.bytes + s.bytes, gzipBytes: a.gzipBytes + s.gzipBytes }), { bytes: 0, gzipBytes: 0 });
  return { ...sizes, total };
}

/** Cold loads of the clusters page vs a one-line page, in Chromium. */
async function measureFirstPaint(samples: number): Promise<object> {
  const world = await startWorld();
  const baseline = createServer((_req, res) => res.writeHead(200, { "content-type": "text/html" }).end("<!doctype html><title>b</title><p>baseline</p>"));
  await new Promise<void>((r) => baseline.listen(0, "127.0.0.1", r));
  const baselineUrl = `http://127.0.0.1:${(baseline.address() as AddressInfo).port}/`;
  await enableDashboard(world);
  await writeDefinition(world, "alpha", definitionText(world, { nodes: ["l1", "l2"] }));
  const daemon = await startInProcessDaemon(world);
  const browser = await launchChromium();
  try {
    await waitForStatus(world, "alpha", (s) => s.plan !== undefined);
    const load = async (url: string, readySelector: string | undefined): Promise<{ fcp: number; ready: number | undefined }> => {
      const context = await browser.newContext();
      const page = await context.newPage();
      await page.goto(url);
      if (readySelector !== undefined) await page.waitForSelector(readySelector);
      const ready = readySelector === undefined ? undefined : ((await page.evaluate("performance.now()")) as number);
      await page.waitForFunction("performance.getEntriesByName('first-contentful-paint').length > 0");
      const fcp = (await page.evaluate("performance.getEntriesByName('first-contentful-paint')[0].startTime")) as number;
      await context.close();
      return { fcp, ready };
    };
    // One warm-up of each (the browser's own start-up), then alternate.
    await load(baselineUrl, undefined);
    await load(daemon.uiUrl!, "tr[data-cluster=alpha]");
    const page: number[] = [];
    const rows: number[] = [];
    const base: number[] = [];
    for (let i = 0; i < samples; i++) {
      base.push((await load(baselineUrl, undefined)).fcp);
      const measured = await load(daemon.uiUrl!, "tr[data-cluster=alpha]");
      page.push(measured.fcp);
      rows.push(measured.ready!);
    }
    return {
      samples,
      firstContentfulPaintMs: round(median(page)),
      clustersTableShownMs: round(median(rows)),
      baselineFirstContentfulPaintMs: round(median(base)),
      ratioToBaseline: round(median(page) / median(base), 2),
    };
  } finally {
    await browser.close();
    await daemon.stop();
    baseline.close();
    await world.close();
  }
}

/** The stream clients: a separate node process holding `count` connections, counting status events. */
const clientScript = `
const [url, count] = process.argv.slice(2);
const events = new Array(Number(count)).fill(0);
const open = async (i) => {
  const response = await fetch(url);
  const decoder = new TextDecoder();
  for await (const chunk of response.body) events[i] += (decoder.decode(chunk, { stream: true }).match(/^event: status$/gm) ?? []).length;
};
for (let i = 0; i < Number(count); i++) open(i).catch(() => {});
process.on("message", () => process.send(events));
`;

/** Median pass duration with `clients` stream clients vs none. */
async function measurePassWithClients(passes: number, clients: number): Promise<object> {
  const world = await startWorld();
  let dashboard: Dashboard | undefined;
  const settings = await loadSettings(world.settingsFile);
  const pool = createNodePool(settings);
  const log = pino({ level: "silent" });
  const reconciler = new Reconciler({ dir: world.clustersDir, settingsFile: world.settingsFile, pool, log, requeue: () => undefined });
  let edit = 0;
  /**
   * One pass that writes a new status: a new revision (another context length) planned and reported.
   * Its wall time, and the CPU time this process spent on it (every thread: the event loop, libuv's
   * pool, the kernel's loopback delivery to the clients): the clients run in another process on the
   * same two cores, so the wall time also counts them competing for the CPU, which the CPU time does not.
   */
  const pass = async (): Promise<{ wallMs: number; cpuMs: number }> => {
    edit += 1;
    await writeDefinition(world, "bench", definitionText(world, { nodes: ["l1", "l2"], contextLength: 256 + (edit % 64) * 8 }));
    const started = performance.now();
    const cpu = process.cpuUsage();
    await reconciler.reconcile("bench");
    const used = process.cpuUsage(cpu);
    return { wallMs: performance.now() - started, cpuMs: (used.user + used.system) / 1000 };
  };
  try {
    dashboard = await startDashboard({
      address: "127.0.0.1:0",
      token: undefined,
      log,
      source: dashboardSource({ dir: world.clustersDir, settingsFile: world.settingsFile, reconciler, pool, stateDir: world.stateDir }),
    });
    for (let i = 0; i < 5; i++) await pass(); // warm-up: module caches, the first plan
    const scriptFile = join(world.root, "sse-clients.cjs");
    await writeFile(scriptFile, clientScript);
    // Rounds alternate without and with the clients, so drift in this shared machine's load falls
    // on both sides alike.
    const rounds = 3;
    const none: Array<{ wallMs: number; cpuMs: number }> = [];
    const withClients: Array<{ wallMs: number; cpuMs: number }> = [];
    const received: number[] = [];
    for (let r = 0; r < rounds; r++) {
      const share = Math.ceil(passes / rounds);
      for (let i = 0; i < share; i++) none.push(await pass());
      const child = fork(scriptFile, [`${dashboard.url}api/events`, String(clients)], { stdio: "ignore" });
      const deadline = Date.now() + 30_000;
      while (dashboard.clients < clients) {
        if (Date.now() > deadline) throw new Error(`only ${dashboard.clients} of ${clients} stream clients connected in 30 s`);
        await sleep(50);
      }
      for (let i = 0; i < share; i++) withClients.push(await pass());
      await sleep(500);
      received.push(
        ...(await new Promise<number[]>((resolve) => {
          child.once("message", (m) => resolve(m as number[]));
          child.send("report");
        })),
      );
      child.kill();
      while (dashboard.clients > 0) await sleep(50);
    }
    return {
      passes: none.length,
      clients,
      rounds,
      medianPassMsNoClients: round(median(none.map((p) => p.wallMs))),
      medianPassMsWithClients: round(median(withClients.map((p) => p.wallMs))),
      p90PassMsWithClients: round(
        quantile(
          withClients.map((p) => p.wallMs),
          0.9,
        ),
      ),
      ratio: round(median(withClients.map((p) => p.wallMs)) / median(none.map((p) => p.wallMs)), 2),
      // The daemon's own work, whoever else wants the cores: what the clients really cost it.
      medianPassCpuMsNoClients: round(median(none.map((p) => p.cpuMs))),
      medianPassCpuMsWithClients: round(median(withClients.map((p) => p.cpuMs))),
      cpuRatio: round(median(withClients.map((p) => p.cpuMs)) / median(none.map((p) => p.cpuMs)), 2),
      // The absolute cost in CPU: what one connected page adds to a pass that writes one status.
      addedCpuMsPerClient: round((median(withClients.map((p) => p.cpuMs)) - median(none.map((p) => p.cpuMs))) / clients, 3),
      // Each client saw every pass's status of its round (plus the snapshot it got on connecting).
      statusEventsPerClientMin: Math.min(...received),
    };
  } finally {
    await dashboard?.close();
    await pool.close();
    await world.close();
  }
}

/** kill -9 of a stage → its Unhealthy status on the event stream. */
async function measureDeathToStream(kills: number): Promise<object> {
  const world = await startWorld();
  await writeSettings(world, { enabled: true, restartBudget: kills + 2 });
  await enableDashboard(world);
  // The daemon's own monitor defaults (poll 1000 ms, 3 strikes): deaths are learned from exit watches.
  const log = pino({ level: "silent" });
  const daemon = await startDaemon({ dir: world.clustersDir, settingsFile: world.settingsFile, log });
  const stream = new SseReader(new URL("api/events", daemon.uiUrl).href);
  const toStream: number[] = [];
  try {
    const text = definitionText(world, { nodes: ["l1", "l2"], port: await freePort(), portRange: await freePortRange(["127.0.0.1"]) });
    await writeDefinition(world, "live", text);
    type Live = { health: string; stages: Array<{ alive: boolean; pid?: number }> };
    const serving = (e: { event: string; data: unknown }): boolean => {
      const s = e.data as Live;
      return e.event === "status" && s.health === "Healthy" && s.stages.length === 2 && s.stages.every((x) => x.alive);
    };
    let from = 0;
    for (let i = 0; i < kills; i++) {
      // The launch after the last death, as the stream tells it (the file may still hold the one before).
      const running = (await stream.waitFor(serving, 60_000, from)).data as Live;
      await sleep(500);
      from = stream.events.length;
      const pid = await enginePidOf(running.stages[i % 2]!.pid!);
      const killed = performance.now();
      process.kill(pid, "SIGKILL");
      await stream.waitFor((e) => e.event === "status" && (e.data as { health: string }).health === "Unhealthy", 30_000, from);
      toStream.push(performance.now() - killed);
    }
    return {
      kills,
      medianMs: round(median(toStream)),
      maxMs: round(Math.max(...toStream)),
      goalMs: 1000,
      meetsGoal: Math.max(...toStream) <= 1000,
    };
  } finally {
    stream.close();
    await daemon.stop();
    const last = await startDaemon({ dir: world.clustersDir, settingsFile: world.settingsFile, log, teardownOnExit: true });
    await last.whenIdle();
    await last.stop();
    await world.close();
  }
}

function intArg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(name);
  return i >= 0 && args[i + 1] !== undefined ? Number(args[i + 1]) : fallback;
}

function median(values: number[]): number {
  return quantile(values, 0.5);
}

function quantile(values: number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))] ?? NaN;
}

function round(value: number, digits = 1): number {
  return Math.round(value * 10 ** digits) / 10 ** digits;
}
