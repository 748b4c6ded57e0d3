/**
 * mlx-lm's own HTTP server (`mlx_lm.server`, from the project's `.venv-mlx`) started directly by
 * the bench, on loopback addresses leased for this process: one process, or a `--pipeline` ring of
 * N ranks. The ring is started the way shardctl starts it: every rank gets MLX_RANK, MLX_HOSTFILE
 * (the path of a JSON file `[["ip:port"], …]` in rank order), MLX_RING_VERBOSE=1, HF_HUB_OFFLINE=1
 * and HF_HUB_CACHE (an existing empty directory); ranks 0..N-2 start first and each one's
 * `[ring] Rank r accepting` stderr line is awaited before rank N-1 (which connects) starts, since
 * a rank that connects before its neighbour listens spends seconds in back-off. Rank 0 holds the
 * last layers and serves HTTP. Ready = a real one-token completion answered (`/health` answers 200
 * before the ring works).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdir, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { freePort } from "../test/support/free-ports.js";
import { allocateHost } from "../test/support/test-world.js";

export interface MlxServer {
  url: string;
  /** Every process of the deployment, rank 0 first. */
  children: ChildProcess[];
  /** ms from the first spawn to the first one-token completion answered. */
  startMs: number;
  stop(): Promise<void>;
}

interface Spawned {
  child: ChildProcess;
  exited: Promise<unknown>;
  /** Everything the process wrote on stderr so far (kept for error messages). */
  stderr(): string;
}

function spawnServer(python: string, args: string[], env: NodeJS.ProcessEnv): Spawned {
  // The console script sits next to the venv's interpreter.
  const child = spawn(join(dirname(python), "mlx_lm.server"), args, { env: { ...process.env, PYTHONUNBUFFERED: "1", ...env }, stdio: ["ignore", "ignore", "pipe"] });
  let err = "";
  child.stderr!.on("data", (c: Buffer) => {
    // Keep the tail only: servers log one line per request.
    err = (err + c.toString("utf8")).slice(-16_384);
  });
  return { child, exited: new Promise((r) => child.once("exit", r)), stderr: () => err };
}

async function stopAll(procs: Spawned[]): Promise<void> {
  for (const p of procs) if (p.child.exitCode === null && p.child.signalCode === null) p.child.kill("SIGTERM");
  await Promise.all(procs.map((p) => p.exited));
}

/** Resolve when `p`'s stderr contains `needle`; reject when it exits first or after `timeoutMs`. */
function waitForStderr(p: Spawned, needle: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => done(new Error(`no "${needle}" within ${timeoutMs} ms:\n${p.stderr()}`)), timeoutMs);
    const onData = (): void => {
      if (p.stderr().includes(needle)) done();
    };
    const onExit = (): void => done(new Error(`exited before "${needle}":\n${p.stderr()}`));
    function done(error?: Error): void {
      clearTimeout(timer);
      p.child.stderr!.off("data", onData);
      p.child.off("exit", onExit);
      if (error === undefined) resolve();
      else reject(error);
    }
    p.child.stderr!.on("data", onData);
    p.child.once("exit", onExit);
    onData();
  });
}

/** Poll with one-token completions until one is answered (the model is loaded and, for a ring, the ring works). */
async function waitAnswering(url: string, procs: Spawned[], timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const dead = procs.find((p) => p.child.exitCode !== null || p.child.signalCode !== null);
    if (dead !== undefined) throw new Error(`mlx_lm.server exited ${dead.child.exitCode ?? dead.child.signalCode}:\n${dead.stderr()}`);
    try {
      const r = await fetch(`${url}/v1/completions`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ prompt: "the", max_tokens: 1, temperature: 0 }),
        signal: AbortSignal.timeout(30_000),
      });
      if (r.status === 200) return;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`${url} answered no completion within ${timeoutMs} ms:\n${procs.map((p) => p.stderr()).join("\n---\n")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** One `mlx_lm.server` process serving `modelDir` (no MLX_HOSTFILE: not distributed). */
export async function startMlxSingle(python: string, modelDir: string, hubCache: string): Promise<MlxServer> {
  await mkdir(hubCache, { recursive: true });
  const host = await allocateHost();
  const port = await freePort(host);
  const started = performance.now();
  const p = spawnServer(python, ["--model", modelDir, "--host", host, "--port", String(port)], { HF_HUB_OFFLINE: "1", HF_HUB_CACHE: hubCache });
  const url = `http://${host}:${port}`;
  try {
    await waitAnswering(url, [p], 120_000);
  } catch (error) {
    await stopAll([p]);
    throw error;
  }
  return { url, children: [p.child], startMs: performance.now() - started, stop: () => stopAll([p]) };
}

/** A `--pipeline` ring of `ranks` `mlx_lm.server` processes, one leased loopback address each. */
export async function startMlxRing(python: string, modelDir: string, dir: string, ranks: number): Promise<MlxServer> {
  const hubCache = join(dir, "hf-cache");
  await mkdir(hubCache, { recursive: true });
  const hosts: string[] = [];
  for (let r = 0; r < ranks; r++) hosts.push(await allocateHost());
  const ringPorts = await Promise.all(hosts.map((h) => freePort(h)));
  const httpPort = await freePort(hosts[0]);
  const hostfile = join(dir, `ring-${ranks}.json`);
  await writeFile(hostfile, JSON.stringify(hosts.map((h, r) => [`${h}:${ringPorts[r]}`])));
  const procs: Spawned[] = [];
  const started = performance.now();
  const url = `http://${hosts[0]}:${httpPort}`;
  try {
    for (let r = 0; r < ranks; r++) {
      const env = { MLX_RANK: String(r), MLX_HOSTFILE: hostfile, MLX_RING_VERBOSE: "1", HF_HUB_OFFLINE: "1", HF_HUB_CACHE: hubCache };
      // Only rank 0 serves HTTP; the others ignore --host/--port.
      const p = spawnServer(python, ["--model", modelDir, "--pipeline", "--host", hosts[r]!, "--port", String(httpPort)], env);
      procs.push(p);
      if (r < ranks - 1) await waitForStderr(p, `[ring] Rank ${r} accepting`, 60_000);
    }
    await waitAnswering(url, procs, 120_000);
  } catch (error) {
    await stopAll(procs);
    throw error;
  }
  return { url, children: procs.map((p) => p.child), startMs: performance.now() - started, stop: () => stopAll(procs) };
}
