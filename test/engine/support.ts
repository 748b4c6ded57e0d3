/**
 * Helpers for engine tests: free loopback ports, cluster TOML files, and shard-engine processes
 * spawned from the built binary (run `npm run build` first).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { existsSync } from "node:fs";
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { bundledShardEngine, bundledShardEngineCommand } from "../../src/engines/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";

export function requireBuild(): void {
  if (!existsSync(bundledShardEngine)) throw new Error(`${bundledShardEngine} is missing: run \`npm run build\` before the engine tests`);
}

import { freePort } from "../support/free-ports.js";
import { allocateHost } from "../support/test-world.js";
export { freePort };

export interface EngineProcess {
  child: ChildProcess;
  /** Everything written to stderr so far. */
  stderr: () => string;
  /** Resolves with the exit code (or the signal name). */
  exited: Promise<number | string>;
}

const running = new Set<ChildProcess>();

/**
 * Start the built shard-engine with `args`. By default it runs as the launch drivers run it
 * (under this Node.js with shard-engine's node flags); `command` runs it another way.
 */
export function spawnEngine(args: string[], command: readonly string[] = bundledShardEngineCommand, env: NodeJS.ProcessEnv = process.env): EngineProcess {
  const [program, ...programArgs] = command as [string, ...string[]];
  const child = spawn(program, [...programArgs, ...args], { stdio: ["ignore", "pipe", "pipe"], env });
  running.add(child);
  let err = "";
  child.stderr?.on("data", (c: Buffer) => (err += c.toString("utf8")));
  child.stdout?.resume();
  const exited = new Promise<number | string>((done) => {
    child.on("exit", (code, signal) => {
      running.delete(child);
      done(code ?? signal ?? -1);
    });
  });
  return { child, stderr: () => err, exited };
}

/** Kill every engine process this test file started that is still running. */
export async function killAll(): Promise<void> {
  const waits = [...running].map(
    (c) =>
      new Promise<void>((done) => {
        c.once("exit", () => done());
        c.kill("SIGKILL");
      }),
  );
  await Promise.all(waits);
}

export async function waitHealthy(baseUrl: string, proc: EngineProcess[], timeoutMs = 30_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      const r = await fetch(`${baseUrl}/health`);
      if (r.status === 200) return;
    } catch {
      // not listening yet
    }
    for (const p of proc) {
      if (p.child.exitCode !== null) throw new Error(`engine exited early (${p.child.exitCode}):\n${p.stderr()}`);
    }
    if (Date.now() > deadline) throw new Error(`${baseUrl} not healthy in ${timeoutMs} ms:\n${proc.map((p) => p.stderr()).join("\n")}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export interface Cluster {
  baseUrl: string;
  file: string;
  coordinator: EngineProcess;
  stages: EngineProcess[];
  stageAddresses: Array<{ host: string; port: number }>;
  stop(): Promise<void>;
}

export interface ClusterOptions {
  /** Number of stages, or explicit half-open layer ranges per stage. */
  stages: number | Array<[number, number]>;
  tokenFile?: string;
  /** Extra arguments for the coordinator. */
  coordinatorArgs?: string[];
  /** Extra arguments for every stage. */
  stageArgs?: string[];
  /** Directory for the TOML file. */
  dir: string;
  /** The coordinator's HTTP host; default its control address's host. */
  httpHost?: string;
}

/**
 * A loopback address not used yet by this test file, and by no other test file or process either:
 * leased with allocateHost (test/support/test-world.ts), a fresh one per call as before.
 */
export function nextHost(): Promise<string> {
  return allocateHost();
}

export async function writeClusterToml(
  o: ClusterOptions,
): Promise<{ file: string; coordinator: { host: string; port: number }; stages: Array<{ host: string; port: number }> }> {
  const count = typeof o.stages === "number" ? o.stages : o.stages.length;
  const coordHost = await nextHost();
  const coordinator = { host: coordHost, port: await freePort(coordHost) };
  const stages: Array<{ host: string; port: number }> = [];
  for (let i = 0; i < count; i++) {
    const host = await nextHost();
    stages.push({ host, port: await freePort(host) });
  }
  const lines = ["[cluster]", 'name = "test"', "tensor_parallel_size = 1", `pipeline_parallel_size = ${count}`, 'transport_backend = "tcp"', ""];
  lines.push("[[nodes]]", 'id = "coordinator"', `address = "${coordinator.host}:${coordinator.port}"`, 'role = "hybrid"', "");
  stages.forEach((s, i) => {
    lines.push("[[nodes]]", `id = "stage-${i}"`, `address = "${s.host}:${s.port}"`, 'role = "pipeline_stage"', `stage = ${i}`);
    if (typeof o.stages !== "number") lines.push(`layers = [${o.stages[i]![0]}, ${o.stages[i]![1]}]`);
    lines.push("");
  });
  const file = join(o.dir, `cluster-${coordinator.port}.toml`);
  await writeFile(file, lines.join("\n"));
  return { file, coordinator, stages };
}

/** Start the stages (ascending, each listening before the next) and the coordinator; wait until healthy. */
export async function startCluster(modelDir: string, o: ClusterOptions): Promise<Cluster> {
  const layout = await writeClusterToml(o);
  const token = o.tokenFile === undefined ? [] : ["--transport-token-file", o.tokenFile];
  const stages: EngineProcess[] = [];
  for (let i = 0; i < layout.stages.length; i++) {
    const p = spawnEngine([
      "-m",
      modelDir,
      "--distributed-config",
      layout.file,
      "--node-id",
      `stage-${i}`,
      "--host",
      "127.0.0.1",
      "--port",
      "1",
      "--no-warmup",
      ...token,
      ...(o.stageArgs ?? []),
    ]);
    stages.push(p);
    await waitListening(layout.stages[i]!, p);
  }
  const httpHost = o.httpHost ?? layout.coordinator.host;
  // Not the control port on the same host: that one is free until the coordinator binds it, so the
  // kernel may hand it out again (it did, once in a CI run, and the engine refused the pair).
  let httpPort = await freePort(httpHost);
  while (httpHost === layout.coordinator.host && httpPort === layout.coordinator.port) httpPort = await freePort(httpHost);
  const coordinator = spawnEngine([
    "-m",
    modelDir,
    "--distributed-config",
    layout.file,
    "--node-id",
    "coordinator",
    "--host",
    httpHost,
    "--port",
    String(httpPort),
    ...token,
    ...(o.coordinatorArgs ?? []),
  ]);
  const baseUrl = `http://${httpHost}:${httpPort}`;
  await waitHealthy(baseUrl, [coordinator, ...stages]);
  return {
    baseUrl,
    file: layout.file,
    coordinator,
    stages,
    stageAddresses: layout.stages,
    stop: async () => {
      for (const p of [coordinator, ...stages]) if (p.child.exitCode === null) p.child.kill("SIGTERM");
      await Promise.all([coordinator, ...stages].map((p) => p.exited));
    },
  };
}

/** Wait until a TCP address accepts connections (a stage's readiness). */
export async function waitListening(address: { host: string; port: number }, p: EngineProcess, timeoutMs = 20_000): Promise<void> {
  const { connect } = await import("node:net");
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise<boolean>((done) => {
      const s = connect(address.port, address.host);
      s.once("connect", () => {
        s.destroy();
        done(true);
      });
      s.once("error", () => done(false));
    });
    if (ok) return;
    if (p.child.exitCode !== null) throw new Error(`stage exited early (${p.child.exitCode}):\n${p.stderr()}`);
    if (Date.now() > deadline) throw new Error(`${address.host}:${address.port} not listening:\n${p.stderr()}`);
    await new Promise((r) => setTimeout(r, 30));
  }
}

export async function startSingle(modelDir: string, extra: string[] = []): Promise<{ baseUrl: string; proc: EngineProcess; stop: () => Promise<void> }> {
  const host = await nextHost();
  const port = await freePort(host);
  const proc = spawnEngine(["-m", modelDir, "--host", host, "--port", String(port), ...extra]);
  const baseUrl = `http://${host}:${port}`;
  await waitHealthy(baseUrl, [proc]);
  return {
    baseUrl,
    proc,
    stop: async () => {
      if (proc.child.exitCode === null) proc.child.kill("SIGTERM");
      await proc.exited;
    },
  };
}

export async function postJson(url: string, body: unknown): Promise<{ status: number; json: Record<string, unknown> }> {
  const r = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) });
  return { status: r.status, json: (await r.json()) as Record<string, unknown> };
}

/**
 * A 2-stage pipeline of a small test model (4 layers, hidden 64) in `dir` (its model in
 * `dir/tiny-llama`), its transport authenticated, one thread a stage (a long prompt takes seconds),
 * a context of 8192 tokens; `coordinatorArgs` add to the coordinator's.
 */
export async function startLongPromptCluster(dir: string, coordinatorArgs: string[] = []): Promise<{ cluster: Cluster; modelDir: string; model: string }> {
  const model = "tiny-llama";
  const modelDir = join(dir, model);
  await makeTestModel(modelDir, { layers: 4, hidden: 64, vocab: 320, seed: 3 });
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, "long-prompt-token\n");
  const cluster = await startCluster(modelDir, {
    stages: 2,
    dir,
    tokenFile,
    stageArgs: ["--threads", "1"],
    coordinatorArgs: ["--model-name", model, "--context-length", "8192", ...coordinatorArgs],
  });
  return { cluster, modelDir, model };
}
