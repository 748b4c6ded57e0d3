/**
 * An engine that takes requests and does not generate — every completion answered with a server
 * error, or a 200 that is no completion — while its /health answers 200: with a definition's
 * `[engine] generation_watchdog_seconds`, two such answers in a row are a death (GenerationFailed)
 * naming what it answered. A 503 (loading, busy) is /health's to judge and a 429 the load's: neither
 * is one. Real local processes and a real HTTP server standing in for another's engine.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, expect, it } from "vitest";
import { monitorCluster, type DeathEvent, type WatchedCluster, type WatchedProcess } from "../../src/health/index.js";
import { LocalNode, type NodeAccess } from "../../src/nodes/index.js";
import { allocateHost } from "../support/test-world.js";

let dir: string;
let node: NodeAccess;
let host: string;
const started: WatchedProcess[] = [];
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-failing-generation-"));
  host = await allocateHost();
  node = new LocalNode({ name: "local", host: "local", modelDir: dir });
});
afterEach(async () => {
  for (const close of closers.splice(0)) await close();
  for (const p of started.splice(0)) await node.signal(p.pid, "SIGKILL", p.startTime);
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

/** A process leading its own group, as launch starts engines. */
async function startProcess(role: "stage" | "coordinator", index?: number): Promise<WatchedProcess> {
  const { pid, startTime } = await node.startDetached(["sleep", "120"], { logFile: join(dir, `${role}-${index ?? "c"}.log`), cwd: dir });
  const process: WatchedProcess = { role, node: "local", pid, startTime, ...(index === undefined ? {} : { index }) };
  started.push(process);
  return process;
}

/** An engine's HTTP: /health 200, completions answered by `complete`; the number of completions asked. */
async function serve(complete: (res: ServerResponse) => void): Promise<{ url: string; asked: () => number }> {
  let asked = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    if (req.url === "/health") return void res.end(JSON.stringify({ status: "ok" }));
    asked++;
    complete(res);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return { url: `http://${host}:${(server.address() as AddressInfo).port}`, asked: () => asked };
}

/** A two-stage mlxcel cluster behind `url`, with a watchdog of 1 s (a probe every 0.5 s). */
async function cluster(url: string): Promise<WatchedCluster> {
  return {
    cluster: "c",
    engine: "mlxcel",
    processes: [await startProcess("stage", 0), await startProcess("stage", 1), await startProcess("coordinator")],
    ports: [],
    coordinatorUrl: url,
    generationWatchdogSeconds: 1,
  };
}

function watch(entry: WatchedCluster): { death: Promise<DeathEvent>; deaths: DeathEvent[] } {
  const deaths: DeathEvent[] = [];
  let resolve!: (e: DeathEvent) => void;
  const death = new Promise<DeathEvent>((r) => (resolve = r));
  const monitor = monitorCluster(entry, { nodeFor: () => node, exitWatch: false, pollIntervalMs: 200, onDeath: (e) => (deaths.push(e), resolve(e)) });
  closers.unshift(() => monitor.stop());
  return { death, deaths };
}

const json = (res: ServerResponse, status: number, body: object): void => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

it("every completion answered 500: GenerationFailed after two probes in a row, quoting the answer and naming the coordinator", async () => {
  const engine = await serve((res) => json(res, 500, { error: { message: "model not loaded: out of memory" } }));
  const { death } = watch(await cluster(engine.url));
  const event = await death;
  expect(event).toMatchObject({ label: "coordinator", reason: "GenerationFailed" });
  expect(event.detail).toBe(
    `a one-token completion through ${engine.url} answered 500: {"error":{"message":"model not loaded: out of memory"}} (2 probes in a row): the engine takes requests and does not generate`,
  );
  expect(engine.asked()).toBe(2);
});

it("every completion answered 200 with a page that is no completion: GenerationFailed", async () => {
  const engine = await serve((res) => {
    res.writeHead(200, { "content-type": "text/html" });
    res.end("<html><body>OK</body></html>");
  });
  const event = await watch(await cluster(engine.url)).death;
  expect(event).toMatchObject({ label: "coordinator", reason: "GenerationFailed" });
  expect(event.detail).toContain("answered 200 with no OpenAI completion: <html><body>OK</body></html> (2 probes in a row)");
});

it("one failed answer between completions is no death; 503 and 429 answers are none either", async () => {
  let n = 0;
  const engine = await serve((res) => {
    n++;
    if (n % 4 === 1) json(res, 500, { error: { message: "one bad request" } });
    else if (n % 4 === 2) json(res, 503, { error: { message: "busy" } });
    else if (n % 4 === 3) json(res, 429, { error: { message: "queue full" } });
    else json(res, 200, { choices: [{ text: "x", index: 0, finish_reason: "length" }] });
  });
  const { deaths } = watch(await cluster(engine.url));
  // Eight probes, 0.5 s apart: a 500 never follows a 500.
  while (engine.asked() < 8) await new Promise((r) => setTimeout(r, 100));
  expect(deaths).toEqual([]);
});
