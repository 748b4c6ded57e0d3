/**
 * `npm run bench -- engine [--hidden 512] [--layers 8] [--tokens 32] [--rounds 5]`: the reference
 * engine on a test model of a few tens of millions of parameters, all processes on loopback.
 *
 * Pipeline figures (every process on one thread, as two stages sharing this machine's cores
 * would be given): single-process decode tokens/s (the baseline), 2- and 3-stage tokens/s as
 * ratios to it, bytes per token per boundary, resident memory per stage vs its weight share, and
 * aggregate tokens/s with 1, 2 and 4 concurrent streams on 2 stages. What a split adds per token
 * is also given in units of the machine's own hop cost, measured in the same rounds (a frame to
 * an idle peer process over loopback): a pipeline of k stages makes k + 1 such hops per token.
 *
 * Speed figures, for the f16 model and the same model quantized to 4 bits, single process with
 * 1 thread and with every core: decode tokens/s against the bound — a same-run SIMD f32
 * matrix-vector product (one thread) over a buffer of as many bytes as the model's weights, i.e.
 * what streaming those bytes once per token allows — time to first token for a 512-token prompt,
 * and the gain of all cores over one for decode and prefill. Because a 4-bit weight is an eighth
 * of an f32 one, a 4-bit token needs several times the bound pass's multiply-adds; "arithmetic"
 * prints that factor and decode's multiply-add rate against the bound's.
 *
 * Against mlx-lm: when the pinned mlx-lm is installed (`.venv-mlx`, which `npm test` sets up),
 * shard-engine in one process (1 thread, every core) ÷ `mlx_lm.server` in one process on the same
 * f16 model (engine-vs-mlx.ts); `npm run bench -- engines` has the wider comparison.
 *
 * Memory: each process reports its RSS just before loading weights (the idle runtime: node,
 * modules, tokenizer, kernel threads) and now, each after a full garbage collection; "memory" =
 * RSS now − RSS before load, read from /debug/stats after the decode runs (so KV caches and
 * scratch buffers are included). It can come out below the weight share when memory the runtime
 * held at start-up is freed and reused later. Goal: ≤ weight share × 1.15.
 *
 * Sampling: one token's choice on a vocabulary of Llama 3's size, the engine's sampler against the
 * plain definition (sampling-cost.ts).
 */
import { spawn, type ChildProcess } from "node:child_process";
import { readFileSync } from "node:fs";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { connect as connectSocket, type Socket } from "node:net";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { TextCodec } from "../src/engine/coordinator/index.js";
import { KernelRuntime, runLinears } from "../src/engine/kernels/index.js";
import { bundledShardEngineCommand } from "../src/engines/index.js";
import { makeTestModel, type TestModelOptions } from "../src/planner/test-model/index.js";
import { CoreCapacity } from "./core-capacity.js";
import { samplingCost } from "./sampling-cost.js";
import { compareWithMlxLm } from "./engine-vs-mlx.js";
import { freePort } from "../test/support/free-ports.js";
import { allocateHost, allocateHosts } from "../test/support/test-world.js";

// This installation's shard-engine, run as the launch drivers run it.
const [node, ...engineArgs] = bundledShardEngineCommand as [string, ...string[]];

interface Proc {
  child: ChildProcess;
  exited: Promise<unknown>;
}

function spawnEngine(args: string[]): Proc {
  const child = spawn(node, [...engineArgs, ...args], { stdio: ["ignore", "ignore", "ignore"] });
  return { child, exited: new Promise((r) => child.on("exit", r)) };
}

async function waitHealthy(url: string, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      if ((await fetch(`${url}/health`)).status === 200) return;
    } catch {
      // not up yet
    }
    if (Date.now() > deadline) throw new Error(`${url} not healthy`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function waitListening(host: string, port: number): Promise<void> {
  for (let i = 0; i < 600; i++) {
    const ok = await new Promise<boolean>((done) => {
      const s = connectSocket(port, host);
      s.once("connect", () => (s.destroy(), done(true)));
      s.once("error", () => done(false));
    });
    if (ok) return;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`${host}:${port} not listening`);
}

interface Deployment {
  url: string;
  procs: Proc[];
  stop(): Promise<void>;
}

async function startSingle(modelDir: string, threads: number): Promise<Deployment> {
  // Leased loopback addresses: no test or other bench running meanwhile listens there.
  const host = await allocateHost();
  const port = await freePort(host);
  const p = spawnEngine(["-m", modelDir, "--host", host, "--port", String(port), "--threads", String(threads)]);
  const url = `http://${host}:${port}`;
  await waitHealthy(url);
  return { url, procs: [p], stop: () => stopAll([p]) };
}

async function startSplit(modelDir: string, dir: string, stages: number): Promise<Deployment> {
  const hosts = await allocateHosts(stages);
  const ports = await Promise.all(hosts.map((h) => freePort(h)));
  const controlHost = await allocateHost();
  const controlPort = await freePort(controlHost);
  const toml = [
    "[cluster]",
    'name = "bench"',
    `pipeline_parallel_size = ${stages}`,
    "",
    "[[nodes]]",
    'id = "coordinator"',
    `address = "${controlHost}:${controlPort}"`,
    'role = "hybrid"',
    "",
    ...hosts.flatMap((h, i) => ["[[nodes]]", `id = "stage-${i}"`, `address = "${h}:${ports[i]}"`, 'role = "pipeline_stage"', `stage = ${i}`, ""]),
  ].join("\n");
  const file = join(dir, `cluster-${stages}.toml`);
  await writeFile(file, toml);
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, "bench-token");
  const auth = ["--transport-token-file", tokenFile];
  const procs: Proc[] = [];
  for (let i = 0; i < stages; i++) {
    procs.push(
      spawnEngine([
        "-m",
        modelDir,
        "--distributed-config",
        file,
        "--node-id",
        `stage-${i}`,
        "--host",
        hosts[i]!,
        "--port",
        "1",
        "--no-warmup",
        "--threads",
        "1",
        ...auth,
      ]),
    );
    await waitListening(hosts[i]!, ports[i]!);
  }
  const httpPort = await freePort(controlHost);
  procs.push(spawnEngine(["-m", modelDir, "--distributed-config", file, "--node-id", "coordinator", "--host", controlHost, "--port", String(httpPort), ...auth]));
  const url = `http://${controlHost}:${httpPort}`;
  await waitHealthy(url);
  return { url, procs, stop: () => stopAll(procs) };
}

async function stopAll(procs: Proc[]): Promise<void> {
  for (const p of procs) if (p.child.exitCode === null) p.child.kill("SIGTERM");
  await Promise.all(procs.map((p) => p.exited));
}

/** One greedy completion of `tokens` tokens; returns tokens generated and seconds. */
async function complete(url: string, tokens: number, prompt: string): Promise<{ tokens: number; seconds: number }> {
  const start = performance.now();
  const r = await fetch(`${url}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ prompt, max_tokens: tokens, temperature: 0 }),
  });
  const body = (await r.json()) as { usage?: { completion_tokens: number }; error?: unknown };
  if (body.usage === undefined) throw new Error(`completion failed: ${JSON.stringify(body)}`);
  return { tokens: body.usage.completion_tokens, seconds: (performance.now() - start) / 1000 };
}

/**
 * Decode rate of one streamed completion: tokens after the first event ÷ time from the first
 * event to the last, tokens/s (prompt processing excluded). Tokens are counted from the streamed
 * log probabilities, one entry per token.
 */
async function decodeRate(url: string, tokens: number, prompt: string): Promise<number> {
  const r = await fetch(`${url}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ prompt, max_tokens: tokens, temperature: 0, stream: true, logprobs: 0 }),
  });
  if (r.body === null) throw new Error("no stream");
  const decoder = new TextDecoder();
  let buffered = "";
  let first: { at: number; tokens: number } | undefined;
  let last = { at: 0, tokens: 0 };
  for await (const chunk of r.body as unknown as AsyncIterable<Uint8Array>) {
    const at = performance.now();
    buffered += decoder.decode(chunk, { stream: true });
    const events = buffered.split("\n\n");
    buffered = events.pop() ?? "";
    for (const event of events) {
      const data = event.replace(/^data: /, "");
      if (data === "[DONE]" || data === "") continue;
      const parsed = JSON.parse(data) as { choices: Array<{ logprobs: { tokens: string[] } | null }> };
      const count = parsed.choices[0]?.logprobs?.tokens.length ?? 0;
      if (count === 0) continue;
      last = { at, tokens: last.tokens + count };
      first ??= { ...last };
    }
  }
  if (first === undefined || last.tokens - first.tokens < 4) throw new Error(`decode produced only ${last.tokens} tokens`);
  return (last.tokens - first.tokens) / ((last.at - first.at) / 1000);
}

/** Time to first token for a prompt of `length` token ids, ms. */
async function timeToFirstToken(url: string, length: number, vocab: number): Promise<number> {
  const prompt = Array.from({ length }, (_, i) => 1 + ((i * 7919) % (vocab - 1)));
  const start = performance.now();
  const r = await fetch(`${url}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt, max_tokens: 1, temperature: 0 }) });
  const body = (await r.json()) as { usage?: unknown };
  if (body.usage === undefined) throw new Error(`prompt failed: ${JSON.stringify(body)}`);
  return performance.now() - start;
}

/**
 * The bound: one pass of a SIMD f32 matrix-vector product (one thread, the engine's own kernel)
 * over a buffer of `bytes` — what reading the model's weight bytes once costs — as passes/s.
 */
class StreamingBound {
  private readonly runtime = new KernelRuntime({ threads: 1 });
  private readonly call: Parameters<typeof runLinears>[1];
  /** Multiply-adds of one pass (one per f32 weight). */
  readonly multiplyAdds: number;

  constructor(bytes: number) {
    const inN = 4096;
    const out = Math.max(1, Math.round(bytes / 4 / inN));
    this.multiplyAdds = out * inN;
    const home = this.runtime.home;
    const { arena, ptr } = this.runtime.placeWeights(out * inN * 4);
    // Touch every page with non-zero values, as loaded weights are.
    const w = arena.f32(ptr, out * inN);
    for (let i = 0; i < w.length; i++) w[i] = ((i % 97) - 48) / 64;
    const x = this.runtime.buffer(home, "x", inN * 4);
    home.f32(x, inN).fill(0.5);
    const y = this.runtime.buffer(home, "y", out * 4);
    this.call = [{ weights: { format: "float", kind: "f32", out, in: inN, arena, weight: ptr, specials: undefined }, x, y }];
  }

  /** Passes per second over ~200 ms. */
  rate(): number {
    runLinears(this.runtime, this.call, 1);
    const start = performance.now();
    let passes = 0;
    while (performance.now() - start < 200) {
      runLinears(this.runtime, this.call, 1);
      passes++;
    }
    return passes / ((performance.now() - start) / 1000);
  }

  close(): Promise<void> {
    return this.runtime.close();
  }
}

/**
 * The machine's cost of one pipeline hop: a frame of `bytes` sent over loopback TCP to a peer
 * process that has been idle for `idleMs` (as a stage is between its tokens), echoed back, and
 * half the round trip taken. On a virtual machine most of it is waking the idle peer's CPU.
 */
class IdlePeerHop {
  private constructor(
    private readonly peer: ChildProcess,
    private readonly socket: Socket,
    private readonly frame: Buffer,
  ) {}

  static async start(host: string, bytes: number): Promise<IdlePeerHop> {
    const echo = `const s = require("node:net").createServer((c) => { c.setNoDelay(true); c.on("data", (d) => c.write(d)); }); s.listen(0, ${JSON.stringify(host)}, () => process.stdout.write(String(s.address().port) + "\\n"));`;
    const peer = spawn(process.execPath, ["-e", echo], { stdio: ["ignore", "pipe", "ignore"] });
    try {
      const port = await new Promise<number>((resolve, reject) => {
        peer.stdout?.once("data", (d: Buffer) => resolve(Number(d.toString().trim())));
        peer.once("exit", (code) => reject(new Error(`the echo peer exited (${code})`)));
      });
      const socket = connectSocket(port, host);
      socket.setNoDelay(true);
      await new Promise((resolve, reject) => {
        socket.once("connect", resolve);
        socket.once("error", reject);
      });
      return new IdlePeerHop(peer, socket, Buffer.alloc(bytes, 7));
    } catch (error) {
      peer.kill();
      throw error;
    }
  }

  /** Median one-way time over `samples` round trips, each after `idleMs` of silence, ms. */
  async oneWayMs(samples = 20, idleMs = 5): Promise<number> {
    const times: number[] = [];
    for (let i = 0; i < samples; i++) {
      await new Promise((resolve) => setTimeout(resolve, idleMs));
      const start = performance.now();
      const back = new Promise<void>((resolve, reject) => {
        let got = 0;
        const timer = setTimeout(() => done(new Error("the echo peer did not answer within 2 s")), 2000);
        const done = (error?: Error): void => {
          clearTimeout(timer);
          this.socket.off("data", onData);
          this.socket.off("close", onClose);
          if (error === undefined) resolve();
          else reject(error);
        };
        const onData = (d: Buffer): void => {
          got += d.length;
          if (got >= this.frame.length) done();
        };
        const onClose = (): void => done(new Error("the echo peer closed the connection"));
        this.socket.on("data", onData);
        this.socket.once("close", onClose);
      });
      this.socket.write(this.frame);
      await back;
      times.push((performance.now() - start) / 2);
    }
    return median(times);
  }

  close(): void {
    this.socket.destroy();
    this.peer.kill();
  }
}

/** CPU time (user + system) a process has used so far, ms (Linux /proc). */
function cpuMs(p: Proc): number {
  const fields = readFileSync(`/proc/${p.child.pid}/stat`, "utf8").split(") ")[1]?.split(" ") ?? [];
  return (Number(fields[11]) + Number(fields[12])) * 10;
}

/**
 * Aggregate tokens/s of `streams` concurrent completions, and how many CPU cores the stage
 * processes actually got meanwhile (Σ stage CPU time / wall time): on a shared machine that, not
 * the pipeline, bounds the concurrent gain.
 */
async function throughput(d: Deployment, stageProcs: Proc[], streams: number, tokens: number): Promise<{ rate: number; stageCores: number }> {
  const cpu0 = stageProcs.map(cpuMs);
  const start = performance.now();
  const results = await Promise.all(Array.from({ length: streams }, (_, i) => complete(d.url, tokens, `stream ${i} says`)));
  const wallMs = performance.now() - start;
  const total = results.reduce((s, r) => s + r.tokens, 0);
  const used = stageProcs.reduce((s, p, i) => s + cpuMs(p) - (cpu0[i] as number), 0);
  return { rate: total / (wallMs / 1000), stageCores: used / wallMs };
}

interface StageStats {
  nodeId: string;
  weightBytes: number;
  rss: number;
  rssBeforeLoad: number;
  rssAfterLoad: number;
  bytesSentDownstream?: number;
  rowsSentDownstream?: number;
}

async function stats(url: string): Promise<StageStats[]> {
  return ((await (await fetch(`${url}/debug/stats`)).json()) as { stages: StageStats[] }).stages;
}

const mib = (b: number): number => Math.round((b / 1048576) * 100) / 100;
const round = (x: number, d = 3): number => Math.round(x * 10 ** d) / 10 ** d;

/** Σ weight bytes of the stages in a deployment's stats. */
const weightBytesOf = (s: StageStats[]): number => s.reduce((sum, x) => sum + x.weightBytes, 0);

function memory(s: StageStats[]): object[] {
  return s.map((x) => ({
    node: x.nodeId,
    weightShareMiB: mib(x.weightBytes),
    rssMiB: mib(x.rss),
    idleRuntimeMiB: mib(x.rssBeforeLoad),
    residentAfterLoadMiB: mib(x.rssAfterLoad - x.rssBeforeLoad),
    memoryMiB: mib(x.rss - x.rssBeforeLoad),
    memoryOverWeightShare: round((x.rss - x.rssBeforeLoad) / x.weightBytes),
  }));
}

function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

/** Median of a non-empty list. */
function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? (s[mid] as number) : ((s[mid - 1] as number) + (s[mid] as number)) / 2;
}

export async function run(args: string[]): Promise<object> {
  const hidden = option(args, "hidden", 512);
  const layers = option(args, "layers", 8);
  const tokens = option(args, "tokens", 32);
  const rounds = option(args, "rounds", 5);
  const dir = await mkdtemp(join(tmpdir(), "bench-engine-"));
  const deployments: Deployment[] = [];
  const loadBefore = loadavg();
  try {
    const modelDir = join(dir, "model");
    const shape = benchModel({ layers, hidden, vocab: 2048 });
    const model = await makeTestModel(modelDir, shape);
    const prompt = "the";
    // All three deployments run side by side (idle when not measured) and are measured in
    // interleaved rounds, so each ratio compares runs made moments apart on this shared machine.
    const single = await startSingle(modelDir, 1);
    deployments.push(single);
    const two = await startSplit(modelDir, dir, 2);
    deployments.push(two);
    const three = await startSplit(modelDir, dir, 3);
    deployments.push(three);
    for (const d of deployments) await complete(d.url, 4, prompt);

    const rates = { single: [] as number[], stages2: [] as number[], stages3: [] as number[] };
    // The machine's hop cost, measured in the same rounds: a pipeline of k stages makes k + 1
    // hops per token (coordinator → stage 0 → … → coordinator), each to an idle process.
    const hop = await IdlePeerHop.start(await allocateHost(), 9 + 12 + hidden * 4);
    const hopMs: number[] = [];
    try {
      for (let r = 0; r < rounds; r++) {
        hopMs.push(await hop.oneWayMs());
        for (const [key, d] of [
          ["single", single],
          ["stages2", two],
          ["stages3", three],
        ] as const) {
          const c = await complete(d.url, tokens, prompt);
          rates[key].push(c.tokens / c.seconds);
        }
      }
    } finally {
      hop.close();
    }
    const ratio2 = median(rates.stages2.map((v, i) => v / (rates.single[i] as number)));
    const ratio3 = median(rates.stages3.map((v, i) => v / (rates.single[i] as number)));
    // Time a split adds per token, ms, and that time in units of the machine's idle-peer hops.
    const splitCost = (split: number[], hops: number): object => {
      const added = median(split.map((v, i) => 1000 / v - 1000 / (rates.single[i] as number)));
      return { addedMsPerToken: round(added), hopsPerToken: hops, addedOverHops: round(added / (hops * median(hopMs)), 2) };
    };

    const before = (await stats(two.url))[0]!;
    await complete(two.url, tokens, prompt);
    const after = (await stats(two.url))[0]!;
    const bytesPerToken = ((after.bytesSentDownstream ?? 0) - (before.bytesSentDownstream ?? 0)) / ((after.rowsSentDownstream ?? 0) - (before.rowsSentDownstream ?? 0));

    // Memory in the single-stream steady state, then again after the concurrent streams.
    const singleStats = await stats(single.url);
    const twoStats = await stats(two.url);
    const threeStats = await stats(three.url);

    const streams: Record<string, number[]> = { "1": [], "2": [], "4": [] };
    const cores: Record<string, number[]> = { "1": [], "2": [], "4": [] };
    const stageProcs = two.procs.slice(0, 2);
    const capacity = CoreCapacity.start(availableParallelism());
    const machineGave: number[] = [];
    try {
      for (let r = 0; r < Math.max(2, Math.ceil(rounds / 2)); r++) {
        machineGave.push(await capacity.coresOverOne());
        for (const n of [1, 2, 4]) {
          const t = await throughput(two, stageProcs, n, tokens);
          streams[String(n)]!.push(t.rate);
          cores[String(n)]!.push(t.stageCores);
        }
      }
    } finally {
      await capacity.close();
    }
    const gain2 = median((streams["2"] as number[]).map((v, i) => v / (streams["1"]![i] as number)));
    const gain4 = median((streams["4"] as number[]).map((v, i) => v / (streams["1"]![i] as number)));

    const twoAfterStreams = await stats(two.url);
    const worstMemory = Math.max(...[...twoStats, ...threeStats].map((s) => (s.rss - s.rssBeforeLoad) / s.weightBytes));
    await Promise.all(deployments.splice(0).map((d) => d.stop()));

    const speed = await measureSpeed(
      dir,
      modelDir,
      { layers, hidden, vocab: 2048, tokens: Math.max(tokens, 48), rounds: Math.max(3, Math.ceil(rounds / 2)) },
      deployments,
    );
    return {
      model: { layers, hidden, intermediate: shape.intermediate, vocab: shape.vocab, dtype: "f16", parameters: model.totalBytes / 2, weightMiB: mib(model.totalBytes) },
      tokensPerRequest: tokens,
      rounds,
      loadAverage: { before: loadBefore.map((x) => round(x, 2)), after: loadavg().map((x) => round(x, 2)), cores: cpus().length },
      decodeTokensPerSecond: {
        single: { median: round(median(rates.single), 2), best: round(Math.max(...rates.single), 2) },
        stages2: { median: round(median(rates.stages2), 2), best: round(Math.max(...rates.stages2), 2) },
        stages3: { median: round(median(rates.stages3), 2), best: round(Math.max(...rates.stages3), 2) },
      },
      splitOverSingle: { stages2: round(ratio2), stages3: round(ratio3), method: "median of per-round ratios", goal: 0.9 },
      splitCost: {
        idlePeerHopMs: round(median(hopMs)),
        stages2: splitCost(rates.stages2, 3),
        stages3: splitCost(rates.stages3, 4),
        method:
          "addedMsPerToken = median per round of 1000/split − 1000/single tokens/s; idlePeerHopMs = half the loopback round trip of one activation frame to a process idle for 5 ms (median of 20 per round, in the same rounds); addedOverHops = addedMsPerToken ÷ (hops × idlePeerHopMs)",
      },
      bytesPerTokenPerBoundary: { measured: round(bytesPerToken, 1), expected: 9 + 12 + hidden * 4, note: "frame header 9 + activation header 12 + hidden × 4 (f32)" },
      memory: {
        method: "RSS now − RSS just before loading weights (same process), after the single-stream rounds",
        single: memory(singleStats),
        stages2: memory(twoStats),
        stages3: memory(threeStats),
        stages2AfterConcurrentStreams: memory(twoAfterStreams),
        worstOverWeightShare: round(worstMemory),
        goal: 1.15,
      },
      concurrentStreamsOn2Stages: {
        tokensPerSecond: Object.fromEntries(Object.entries(streams).map(([k, v]) => [`streams${k}`, round(median(v), 2)])),
        twoOverOne: round(gain2),
        fourOverOne: round(gain4),
        coresUsedByStages: Object.fromEntries(Object.entries(cores).map(([k, v]) => [`streams${k}`, round(median(v), 2)])),
        machineGave: round(median(machineGave), 2),
        method:
          "median of per-round ratios; coresUsedByStages = Σ stage CPU time / wall time (2 would be both cores); machineGave = cores' worth of work the machine gave in the same rounds (see speed.method)",
        goal: 1.6,
      },
      threadsPerProcess: 1,
      speed: speed.figures,
      textPerToken: textCost(modelDir),
      samplingPerToken: samplingCost(),
      mlxLm: await compareWithMlxLm(dir, modelDir, (threads) => startSingle(modelDir, threads), Math.max(tokens, 48), Math.max(3, Math.ceil(rounds / 2))),
      goalsMet: { splitRatio: ratio2 >= 0.9 && ratio3 >= 0.9, memory: worstMemory <= 1.15, concurrency: gain2 >= 1.6, ...speed.goalsMet },
    };
  } finally {
    await Promise.all(deployments.map((d) => d.stop()));
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * What turning sampled tokens into text costs the coordinator for one token, at token n of a
 * completion: decoding all n tokens again (how it was done first, the baseline), a window of the
 * last few with the clean-up of tokenization spaces over the whole text (how it was done next),
 * and CompletionText (the window, and the clean-up of only what is not settled), µs.
 */
function textCost(modelDir: string): object {
  const codec = new TextCodec(modelDir);
  const words = ["the", " cat", " sat", " on", " a", " mat", ",", " don't", " you", " see", "?", " é", " €", "\n"];
  let source = "";
  for (let i = 0; source.length < 20_000; i++) source += words[(i * 7 + (i >> 3)) % words.length];
  const ids = codec.encode(source);
  const timeUs = (f: () => void, times: number): number => {
    const start = performance.now();
    for (let i = 0; i < times; i++) f();
    return ((performance.now() - start) * 1000) / times;
  };
  const at: Record<string, object> = {};
  for (const n of [32, 1024, 4096]) {
    const wholeUs = median([0, 1, 2, 3, 4].map(() => timeUs(() => codec.decode(ids.slice(0, n)), 1)));
    const expected = codec.decode(ids.slice(0, n));
    const raw = codec.incrementalText();
    for (let i = 0; i < n - 16; i++) raw.push(ids[i] as number);
    let next = n - 16;
    const wholeCleanUpUs = timeUs(() => codec.cleanUp(raw.push(ids[next++] as number)), 16);
    if (codec.cleanUp(raw.text) !== expected) throw new Error(`incremental text differs from the full decode at ${n} tokens`);
    const text = codec.completionText();
    for (let i = 0; i < n - 16; i++) text.push(ids[i] as number);
    next = n - 16;
    let last = "";
    const windowUs = timeUs(() => (last = text.push(ids[next++] as number).text), 16);
    if (last !== expected) throw new Error(`completion text differs from the full decode at ${n} tokens`);
    at[`token${n}`] = {
      wholeListUs: round(wholeUs, 1),
      wholeCleanUpUs: round(wholeCleanUpUs, 1),
      windowUs: round(windowUs, 1),
      wholeOverWindow: round(wholeUs / windowUs, 1),
      wholeCleanUpOverWindow: round(wholeCleanUpUs / windowUs, 2),
    };
  }
  return {
    ...at,
    method:
      "one token's text at token n: the whole list decoded again (median of 5); IncrementalText's window plus the clean-up of spaces over the whole text (wholeCleanUp); CompletionText's window and clean-up of the unsettled rest (window); means of 16 tokens up to n; the texts are checked equal to the full decode",
  };
}

interface SpeedOptions {
  layers: number;
  hidden: number;
  vocab: number;
  /** Tokens per decode measurement. */
  tokens: number;
  rounds: number;
}

/** The bench's test model: heads of 64, half as many key-value heads, an MLP 3 × hidden wide. */
function benchModel(o: {
  layers: number;
  hidden: number;
  vocab: number;
}): Required<Pick<TestModelOptions, "layers" | "hidden" | "heads" | "kvHeads" | "intermediate" | "vocab" | "seed">> {
  return { layers: o.layers, hidden: o.hidden, heads: o.hidden / 64, kvHeads: o.hidden / 128, intermediate: o.hidden * 3, vocab: o.vocab, seed: 7 };
}

/**
 * Multiply-adds of one decoded token of a model of this shape: per layer the q, k, v and o
 * projections and gate, up and down; then the lm_head. The embedding is a row read, and attention
 * over a short context is left out (under 1 % at the bench's lengths).
 */
function multiplyAddsPerToken(m: ReturnType<typeof benchModel>): number {
  const headDim = m.hidden / m.heads;
  const q = m.heads * headDim;
  const kv = m.kvHeads * headDim;
  return m.layers * (m.hidden * (q + 2 * kv) + q * m.hidden + 3 * m.hidden * m.intermediate) + m.vocab * m.hidden;
}

/** Tokens of the prompt whose time to first token is reported. */
const promptTokens = 512;

/**
 * Decode and prefill of the f16 model and its 4-bit twin, single process on 1 thread and on every
 * core, against the streaming bound measured in the same rounds.
 */
async function measureSpeed(dir: string, f16Dir: string, o: SpeedOptions, deployments: Deployment[]): Promise<{ figures: object; goalsMet: object }> {
  const cores = availableParallelism();
  const q4Dir = join(dir, "model-4bit");
  await makeTestModel(q4Dir, { ...benchModel(o), quantize: 4 });
  const figures: Record<string, object> = {};
  const goals: Record<string, boolean> = {};
  for (const [name, modelDir] of [
    ["f16", f16Dir],
    ["4-bit", q4Dir],
  ] as const) {
    const one = await startSingle(modelDir, 1);
    deployments.push(one);
    const all = await startSingle(modelDir, cores);
    deployments.push(all);
    const weightBytes = weightBytesOf(await stats(one.url));
    const bound = new StreamingBound(weightBytes);
    const capacity = CoreCapacity.start(cores);
    const m = { bound: [] as number[], capacity: [] as number[], decode1: [] as number[], decodeAll: [] as number[], ttft1: [] as number[], ttftAll: [] as number[] };
    try {
      for (const d of [one, all]) await complete(d.url, 8, "the");
      for (let r = 0; r < o.rounds; r++) {
        m.bound.push(bound.rate());
        m.capacity.push(await capacity.coresOverOne());
        m.decode1.push(await decodeRate(one.url, o.tokens, "the"));
        m.decodeAll.push(await decodeRate(all.url, o.tokens, "the"));
        m.ttft1.push(await timeToFirstToken(one.url, promptTokens, o.vocab));
        m.ttftAll.push(await timeToFirstToken(all.url, promptTokens, o.vocab));
      }
    } finally {
      await bound.close();
      await capacity.close();
      await Promise.all([one, all].map((d) => d.stop()));
      deployments.splice(deployments.indexOf(one), 2);
    }
    const perRound = (a: number[], b: number[]): number => median(a.map((v, i) => v / (b[i] as number)));
    const overBound1 = perRound(m.decode1, m.bound);
    const overBoundAll = perRound(m.decodeAll, m.bound);
    const prefillGain = perRound(m.ttft1, m.ttftAll);
    // Decode's multiply-adds per second against the bound's own (its f32 product does one per
    // weight): how close the kernels come to this core's arithmetic on weights, whatever their width.
    const perToken = multiplyAddsPerToken(benchModel(o));
    const overArithmetic = (decode: number[]): number =>
      perRound(
        decode.map((v) => v * perToken),
        m.bound.map((v) => v * bound.multiplyAdds),
      );
    figures[name] = {
      weightMiB: mib(weightBytes),
      boundTokensPerSecond: round(median(m.bound), 1),
      boundGBPerSecond: round((median(m.bound) * weightBytes) / 1e9, 2),
      decodeTokensPerSecond: { threads1: round(median(m.decode1), 1), [`threads${cores}`]: round(median(m.decodeAll), 1) },
      decodeOverBound: { threads1: round(overBound1), [`threads${cores}`]: round(overBoundAll), goal: 0.5 },
      arithmetic: {
        multiplyAddsPerToken: perToken,
        multiplyAddsPerBoundPass: bound.multiplyAdds,
        tokenOverPass: round(perToken / bound.multiplyAdds, 2),
        decodeMultiplyAddRateOverBound: { threads1: round(overArithmetic(m.decode1)), [`threads${cores}`]: round(overArithmetic(m.decodeAll)) },
      },
      timeToFirstTokenMs: { promptTokens, threads1: Math.round(median(m.ttft1)), [`threads${cores}`]: Math.round(median(m.ttftAll)) },
      prefillTokensPerSecond: { threads1: round(promptTokens / (median(m.ttft1) / 1000), 1), [`threads${cores}`]: round(promptTokens / (median(m.ttftAll) / 1000), 1) },
      allCoresOverOne: {
        decode: round(perRound(m.decodeAll, m.decode1)),
        prefill: round(prefillGain),
        cores,
        prefillGoal: 1.6,
        machineGave: round(median(m.capacity), 2),
        prefillOverMachine: round(median(m.ttft1.map((v, i) => v / (m.ttftAll[i] as number) / (m.capacity[i] as number)))),
      },
    };
    goals[`${name}DecodeOverBound`] = Math.max(overBound1, overBoundAll) >= 0.5;
    goals[`${name}PrefillThreads`] = prefillGain >= 1.6;
  }
  return {
    figures: {
      method:
        "median of per-round ratios; bound = one thread's SIMD f32 matrix-vector product over as many bytes as the weights; machineGave = cores' worth of work the machine gave in the same rounds (an L2-resident f32 product on every core at once ÷ on one; below the core count when the host shares the cores), prefillOverMachine = the prefill gain ÷ that; decode = tokens after the first streamed token ÷ their time; time to first token = a 512-token prompt, max_tokens 1; arithmetic: a token needs tokenOverPass times the bound pass's multiply-adds, so decodeOverBound ≤ 1 ÷ tokenOverPass unless the kernels multiply-add faster than the bound's f32 product does (decodeMultiplyAddRateOverBound)",
      ...figures,
    },
    goalsMet: goals,
  };
}
