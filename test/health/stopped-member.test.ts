/**
 * A member that hangs without dying, in an engine whose /health answers 200 through the hang
 * (mlx-lm's ring): real local processes stopped with SIGSTOP, and a real HTTP server that answers
 * /health and never answers a completion. The monitor names the stopped member, whether its own
 * probes or the generation watchdog find the hang first, and names nobody as stopped when nobody is.
 * A definition's `[engine] generation_watchdog_seconds` gives an engine whose /health is otherwise
 * trusted (mlxcel) such a watchdog, and 0 takes mlx-lm's away. The watchdog also judges what its
 * completion is answered: server errors or no completion, twice in a row, are a death.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { monitorCluster, type DeathEvent, type MonitorOptions, type WatchedCluster, type WatchedProcess } from "../../src/health/index.js";
import { LocalNode, type NodeAccess } from "../../src/nodes/index.js";
import { refusingSshNode } from "../support/refusing-ssh-node.js";
import { allocateHost } from "../support/test-world.js";

let dir: string;
let node: NodeAccess;
let host: string;
const started: WatchedProcess[] = [];
const closers: Array<() => Promise<void>> = [];

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-stopped-"));
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

/** A stage process leading its own group, as launch starts engines. */
async function startStage(index: number): Promise<WatchedProcess> {
  const { pid, startTime } = await node.startDetached(["sleep", "120"], { logFile: join(dir, `stage-${index}.log`), cwd: dir });
  const process: WatchedProcess = { role: "stage", index, node: "local", pid, startTime };
  started.push(process);
  return process;
}

/** An HTTP server answering `/health` with `health()` and holding every other request forever; closed after the test. */
async function serveHealthOnly(health: () => { type: string; body: string }): Promise<string> {
  const server: Server = createServer((request, response) => {
    if (request.url !== "/health") return;
    const { type, body } = health();
    response.setHeader("content-type", type);
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  closers.push(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  return `http://${host}:${(server.address() as AddressInfo).port}`;
}

/** An HTTP server that answers /health 200 and holds every other request forever. */
function hungServer(): Promise<string> {
  return serveHealthOnly(() => ({ type: "text/plain", body: "ok" }));
}

/** Two stages and a coordinator of `engine`, its HTTP at `coordinatorUrl`, with a definition's watchdog of `seconds` when given. */
async function twoStageCluster(engine: "mlxcel" | "reference", coordinatorUrl: string, seconds?: number): Promise<WatchedCluster> {
  const coordinator: WatchedProcess = { ...(await startStage(9)), role: "coordinator" };
  delete coordinator.index;
  return {
    cluster: "c",
    engine,
    processes: [await startStage(0), await startStage(1), coordinator],
    ports: [],
    coordinatorUrl,
    ...(seconds === undefined ? {} : { generationWatchdogSeconds: seconds }),
  };
}

/** A two-stage mlxcel cluster whose coordinator answers /health 200 and hangs every completion. */
async function mlxcelCluster(generationWatchdogSeconds?: number): Promise<WatchedCluster> {
  return twoStageCluster("mlxcel", await hungServer(), generationWatchdogSeconds);
}

/**
 * A server with shard-engine's /health (200, `generatedTokens`) that holds every completion:
 * `counting`, its count grows at each answer (a pipeline generating for the requests that hold
 * every slot); otherwise it stands still (a hung one).
 */
function slotsHeldServer(counting: boolean): Promise<string> {
  let generated = 7;
  return serveHealthOnly(() => ({ type: "application/json", body: JSON.stringify({ status: "ok", generatedTokens: counting ? (generated += 5) : generated }) }));
}

/** A two-stage shard-engine cluster with a definition's watchdog of `seconds`. */
async function shardEngineCluster(seconds: number, counting: boolean): Promise<WatchedCluster> {
  return twoStageCluster("reference", await slotsHeldServer(counting), seconds);
}

/** A two-rank mlx-lm cluster: stage 1 (rank 0) serves HTTP. */
async function mlxCluster(): Promise<WatchedCluster> {
  return { cluster: "c", engine: "mlx-lm", processes: [await startStage(0), await startStage(1)], ports: [], coordinatorUrl: await hungServer() };
}

function watch(entry: WatchedCluster, options: Omit<MonitorOptions, "nodeFor" | "onDeath">): { death: Promise<DeathEvent>; deaths: DeathEvent[] } {
  const deaths: DeathEvent[] = [];
  let resolve!: (e: DeathEvent) => void;
  const death = new Promise<DeathEvent>((r) => (resolve = r));
  const monitor = monitorCluster(entry, { nodeFor: () => node, exitWatch: false, ...options, onDeath: (e) => (deaths.push(e), resolve(e)) });
  closers.unshift(() => monitor.stop());
  return { death, deaths };
}

describe("a member stopped while /health answers 200", () => {
  it("its probes name it after two sightings, long before the generation watchdog would", async () => {
    const entry = await mlxCluster();
    // The watchdog is kept out of the way (60 s): the per-node look at process states finds it.
    const { death } = watch(entry, { pollIntervalMs: 100, strikes: 2, generationWatchdog: { intervalMs: 60_000, timeoutMs: 60_000 } });
    const victim = entry.processes[0]!;
    const stoppedAt = Date.now();
    await node.run(["kill", "-STOP", String(victim.pid)]);
    const event = await death;
    // Two probes 100 ms apart; a generous bound, the machine is shared.
    expect(Date.now() - stoppedAt).toBeLessThan(15_000);
    expect(event).toMatchObject({ label: "stage-0", node: "local", reason: "ProcessStopped" });
    expect(event.detail).toBe(`stopped (pid ${victim.pid} in state T, a stop signal such as SIGSTOP) for 2 probes in a row: the mlx-lm pipeline cannot move while it is`);
  });

  it("the generation watchdog, when it times out first, names the stopped member rather than the server it asked", async () => {
    const entry = await mlxCluster();
    // The per-node probes are kept out of the way (60 s between them): the watchdog judges.
    const { death } = watch(entry, { pollIntervalMs: 60_000, generationWatchdog: { intervalMs: 100, timeoutMs: 500 } });
    const victim = entry.processes[0]!;
    await node.run(["kill", "-STOP", String(victim.pid)]);
    const event = await death;
    expect(event).toMatchObject({ label: "stage-0", reason: "GenerationHung" });
    expect(event.detail).toBe(
      `stopped (pid ${victim.pid} in state T, a stop signal such as SIGSTOP) while a one-token completion through ${entry.coordinatorUrl} took over 500 ms`,
    );
  });

  it("a hang with nobody stopped names the server it was seen through, and says nobody was seen stopped", async () => {
    const entry = await mlxCluster();
    const { death } = watch(entry, { pollIntervalMs: 100, generationWatchdog: { intervalMs: 100, timeoutMs: 500 } });
    const event = await death;
    expect(event).toMatchObject({ label: "stage-1", reason: "GenerationHung" });
    expect(event.detail).toBe(
      `a one-token completion through ${entry.coordinatorUrl} took over 500 ms; the pipeline hangs and mlx-lm does not say which member holds it (none was seen stopped)`,
    );
  });

  // Regression: a frozen machine (rank and sshd stopped) was never looked at, yet the death named the
  // healthy HTTP rank, saying "none was seen stopped".
  it("a hang while a member's node does not answer the look names that member and says its node did not answer", async () => {
    const entry = await mlxCluster();
    // Stage 0 on a node whose every question fails (nothing listens at its SSH port).
    const lost = await refusingSshNode("lost", "127.0.0.1", closers, 300);
    const moved = { ...entry, processes: entry.processes.map((p) => (p.index === 0 ? { ...p, node: "lost" } : p)) };
    let resolve!: (e: DeathEvent) => void;
    const death = new Promise<DeathEvent>((r) => (resolve = r));
    const monitor = monitorCluster(moved, {
      nodeFor: (name) => (name === "lost" ? lost : node),
      exitWatch: false,
      // Its liveness probes go unanswered too: a frozen machine, not one slow look.
      pollIntervalMs: 100,
      generationWatchdog: { intervalMs: 100, timeoutMs: 500 },
      onDeath: resolve,
    });
    closers.unshift(() => monitor.stop());
    const event = await death;
    expect(event).toMatchObject({ label: "stage-0", node: "lost", reason: "GenerationHung" });
    expect(event.detail).toBe(
      `a one-token completion through ${entry.coordinatorUrl} took over 500 ms; the pipeline hangs and its node, which misses its liveness probes, did not answer a look at its processes: a member there may hold it (stopped, or its machine frozen or cut off); none was seen stopped where the nodes answered`,
    );
  });

  it("an engine whose /health sees a hang itself (shard-engine) is left to it: a stopped stage is not judged by its state", async () => {
    const entry: WatchedCluster = { cluster: "c", engine: "reference", processes: [await startStage(0), await startStage(1)], ports: [] };
    const { deaths } = watch(entry, { pollIntervalMs: 50, strikes: 2 });
    await node.run(["kill", "-STOP", String(entry.processes[0]!.pid)]);
    // Twenty polls: ten times what a watchdog engine would need.
    await new Promise((r) => setTimeout(r, 1_000));
    expect(deaths).toEqual([]);
  });
});

describe("[engine] generation_watchdog_seconds", () => {
  it("without it, an mlxcel pipeline that hangs behind a /health answering 200, a stage stopped, is not judged (its /health is trusted)", async () => {
    const entry = await mlxcelCluster();
    const { deaths } = watch(entry, { pollIntervalMs: 100, strikes: 2 });
    await node.run(["kill", "-STOP", String(entry.processes[0]!.pid)]);
    // Twenty-five polls: a watchdog engine's stopped-member check needs two.
    await new Promise((r) => setTimeout(r, 2_500));
    expect(deaths).toEqual([]);
  });

  it("with it, mlxcel's hang is found by a one-token completion that outlives it, naming the coordinator", async () => {
    const entry = await mlxcelCluster(1);
    const { death } = watch(entry, { pollIntervalMs: 100 });
    const event = await death;
    expect(event).toMatchObject({ label: "coordinator", reason: "GenerationHung" });
    expect(event.detail).toBe(
      `a one-token completion through ${entry.coordinatorUrl} took over 1000 ms; the pipeline hangs, or every slot stayed busy that long ([engine] generation_watchdog_seconds must exceed the longest a request waits for a free slot), and mlxcel does not say which member holds it (none was seen stopped)`,
    );
  });

  it("with it, a stopped mlxcel stage is named as stopped", async () => {
    // A watchdog of 30 s: its completion (which this server holds) must not outlast the looks at the
    // stopped stage, two polls apart, even on a loaded machine (5 s did once).
    const entry = await mlxcelCluster(30);
    const { death } = watch(entry, { pollIntervalMs: 100, strikes: 2 });
    const victim = entry.processes[0]!;
    await node.run(["kill", "-STOP", String(victim.pid)]);
    const event = await death;
    expect(event).toMatchObject({ label: "stage-0", reason: "ProcessStopped" });
  });

  it("shard-engine counts its tokens in /health: a completion that waits while the count grows is a busy cluster, not a hung one", async () => {
    const entry = await shardEngineCluster(1, true);
    const { deaths } = watch(entry, { pollIntervalMs: 100 });
    // Three probes' deadlines (1 s each, every 0.5 s): without the count, the first is a death.
    await new Promise((r) => setTimeout(r, 3_500));
    expect(deaths).toEqual([]);
  });

  it("shard-engine whose count stands still while the completion waits is hung, and the message says it generated nothing", async () => {
    const entry = await shardEngineCluster(1, false);
    const { death } = watch(entry, { pollIntervalMs: 100 });
    const event = await death;
    expect(event).toMatchObject({ label: "coordinator", reason: "GenerationHung" });
    expect(event.detail).toBe(
      `a one-token completion through ${entry.coordinatorUrl} took over 1000 ms and generated nothing meanwhile (7 tokens since it started); the pipeline hangs and shard-engine does not say which member holds it (none was seen stopped)`,
    );
  });

  it("0 takes mlx-lm's own watchdog away, and with it the look for stopped members", async () => {
    const entry = { ...(await mlxCluster()), generationWatchdogSeconds: 0 };
    const { deaths } = watch(entry, { pollIntervalMs: 100, strikes: 2 });
    // Without the 0 this is a death within two polls (the first test above).
    await node.run(["kill", "-STOP", String(entry.processes[0]!.pid)]);
    await new Promise((r) => setTimeout(r, 2_500));
    expect(deaths).toEqual([]);
  });
});

/** An engine's HTTP: /health 200, completions answered by `complete`; the number of completions asked. */
async function serveCompletions(complete: (res: ServerResponse) => void): Promise<{ url: string; asked: () => number }> {
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

const json = (res: ServerResponse, status: number, body: object): void => {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
};

/**
 * An engine that takes requests and does not generate — every completion answered with a server
 * error, or a 200 that is no completion — while its /health answers 200: with a definition's
 * watchdog, two such answers in a row are a death (GenerationFailed) naming what it answered. A 503
 * (loading, busy) is /health's to judge and a 429 the load's: neither is one.
 */
describe("a watchdog's completion answered, but not with a completion", () => {
  it("every completion answered 500: GenerationFailed after two probes in a row, quoting the answer and naming the coordinator", async () => {
    const engine = await serveCompletions((res) => json(res, 500, { error: { message: "model not loaded: out of memory" } }));
    const { death } = watch(await twoStageCluster("mlxcel", engine.url, 1), { pollIntervalMs: 200 });
    const event = await death;
    expect(event).toMatchObject({ label: "coordinator", reason: "GenerationFailed" });
    expect(event.detail).toBe(
      `a one-token completion through ${engine.url} answered 500: {"error":{"message":"model not loaded: out of memory"}} (2 probes in a row): the engine takes requests and does not generate`,
    );
    expect(engine.asked()).toBe(2);
  });

  it("every completion answered 200 with a page that is no completion: GenerationFailed", async () => {
    const engine = await serveCompletions((res) => {
      res.writeHead(200, { "content-type": "text/html" });
      res.end("<html><body>OK</body></html>");
    });
    const event = await watch(await twoStageCluster("mlxcel", engine.url, 1), { pollIntervalMs: 200 }).death;
    expect(event).toMatchObject({ label: "coordinator", reason: "GenerationFailed" });
    expect(event.detail).toContain("answered 200 with no OpenAI completion: <html><body>OK</body></html> (2 probes in a row)");
  });

  it("one failed answer between completions is no death; 503 and 429 answers are none either", async () => {
    let n = 0;
    const engine = await serveCompletions((res) => {
      n++;
      if (n % 4 === 1) json(res, 500, { error: { message: "one bad request" } });
      else if (n % 4 === 2) json(res, 503, { error: { message: "busy" } });
      else if (n % 4 === 3) json(res, 429, { error: { message: "queue full" } });
      else json(res, 200, { choices: [{ text: "x", index: 0, finish_reason: "length" }] });
    });
    const { deaths } = watch(await twoStageCluster("mlxcel", engine.url, 1), { pollIntervalMs: 200 });
    // Eight probes, 0.5 s apart: a 500 never follows a 500.
    while (engine.asked() < 8) await new Promise((r) => setTimeout(r, 100));
    expect(deaths).toEqual([]);
  });

  it("every completion refused as busy (429) while shard-engine's count of tokens stands still: the full queue does not hide a hang", async () => {
    let generated = 7;
    const counting = { on: false };
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      req.resume();
      if (req.url === "/health") return void json(res, 200, { status: "ok", generatedTokens: counting.on ? (generated += 5) : generated });
      json(res, 429, { error: { message: "queue full", code: "queue_full" } });
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });
    const url = `http://${host}:${(server.address() as AddressInfo).port}`;
    // First a queue kept full by a pipeline that generates: busy, not hung.
    counting.on = true;
    const { death, deaths } = watch(await twoStageCluster("reference", url, 1), { pollIntervalMs: 200 });
    await new Promise((r) => setTimeout(r, 3_500));
    expect(deaths).toEqual([]);
    counting.on = false;
    const event = await death;
    expect(event).toMatchObject({ label: "coordinator", reason: "GenerationHung" });
    expect(event.detail).toMatch(
      /^a one-token completion through \S+ was refused as busy \(429\) and the pipeline generated nothing in 1000 ms \(\d+ tokens since it started\); the pipeline hangs and shard-engine does not say which member holds it/,
    );
  });

  it("an engine that asks for the model by name is asked again naming it, and judged on that answer", async () => {
    const bodies: string[] = [];
    const server = createServer((req: IncomingMessage, res: ServerResponse) => {
      let body = "";
      req.on("data", (c: Buffer) => (body += c.toString("utf8")));
      req.on("end", () => {
        if (req.url === "/health") return void json(res, 200, { status: "ok" });
        bodies.push(body);
        if (!body.includes('"model"')) return json(res, 400, { error: { message: "the request must name its model" } });
        json(res, 500, { error: { message: "weights failed to load" } });
      });
    });
    await new Promise<void>((resolve) => server.listen(0, host, resolve));
    closers.push(async () => {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    });
    const url = `http://${host}:${(server.address() as AddressInfo).port}`;
    const event = await watch({ ...(await twoStageCluster("mlxcel", url, 1)), model: "org/tiny" }, { pollIntervalMs: 200 }).death;
    expect(event).toMatchObject({ label: "coordinator", reason: "GenerationFailed" });
    expect(event.detail).toContain('answered 500: {"error":{"message":"weights failed to load"}}');
    expect(bodies.filter((b) => b.includes('"model":"org/tiny"'))).toHaveLength(2);
  });
});
