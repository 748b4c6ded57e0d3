/**
 * `npm run bench -- engines [--hidden 512] [--layers 8] [--tokens 64] [--rounds 3] [--launch-rounds 2]`:
 * shard-engine against MLX's own mlx-lm (`mlx_lm.server`, the pinned versions in `.venv-mlx`), all
 * processes on leased loopback addresses of this machine, baselines measured in the same run.
 *
 *   1. mlx-lm as a 2-rank `--pipeline` ring ÷ mlx-lm in one process, decode tokens/s, on the same
 *      Qwen2 test model (mlx-lm pipelines only families whose model class has `pipeline`; Llama is
 *      not one of them).
 *   2. shard-engine in one process ÷ mlx-lm in one process, decode tokens/s, on the same Llama test
 *      model (shard-engine with 1 thread and with every core; mlx-lm with its defaults).
 *   3. launch → Ready of a two-stage cluster through the real daemon on two loopback sshd nodes,
 *      mlx-lm (the Qwen2 model) ÷ shard-engine (the Llama model of the same size), from the status
 *      file's timeline.
 *
 * Decode = (tokens − 1) ÷ (time of a `tokens`-token completion − time of a 1-token completion of the
 * same prompt), greedy, non-streamed (bench/completion-timing.ts). Deployments compared with each
 * other run side by side and are measured in interleaved rounds; ratios are medians of per-round
 * ratios.
 */
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, cpus, loadavg, tmpdir } from "node:os";
import { join } from "node:path";
import { bundledShardEngineCommand } from "../src/launch/index.js";
import { makeTestModel } from "../src/planner/test-model/index.js";
import { freePort } from "../test/support/free-ports.js";
import { ensureMlxVenv } from "../test/support/mlx-venv.js";
import { allocateHost } from "../test/support/test-world.js";
import { median, round, sampleDecode, type DecodeSample } from "./completion-timing.js";
import { measureLaunchToReady, mlxLmKind, shardEngineKind } from "./engines-launch.js";
import { startMlxRing, startMlxSingle } from "./mlx-servers.js";

const prompt = "the";

interface Server {
  url: string;
  stop(): Promise<void>;
}

/** The bundled shard-engine in one process, ready when /health answers 200. */
async function startShardEngine(modelDir: string, threads: number): Promise<Server> {
  const host = await allocateHost();
  const port = await freePort(host);
  const [node, ...engineArgs] = bundledShardEngineCommand as [string, ...string[]];
  const child: ChildProcess = spawn(node, [...engineArgs, "-m", modelDir, "--host", host, "--port", String(port), "--threads", String(threads)], {
    stdio: ["ignore", "ignore", "ignore"],
  });
  const exited = new Promise((r) => child.once("exit", r));
  const url = `http://${host}:${port}`;
  const stop = async (): Promise<void> => {
    if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
    await exited;
  };
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (child.exitCode !== null) throw new Error(`shard-engine exited ${child.exitCode} before it was healthy`);
    const ok = await fetch(`${url}/health`).then(
      (r) => r.status === 200,
      () => false,
    );
    if (ok) return { url, stop };
    if (Date.now() > deadline) {
      await stop();
      throw new Error(`shard-engine at ${url} not healthy in 60 s`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Interleaved rounds over `servers` (after one warm-up completion each): per server its samples,
 * in round order, so ratios can be taken round by round.
 */
async function measureDecode(servers: Record<string, Server>, rounds: number, tokens: number): Promise<Record<string, DecodeSample[]>> {
  for (const s of Object.values(servers)) await sampleDecode(s.url, prompt, 8);
  const out: Record<string, DecodeSample[]> = Object.fromEntries(Object.keys(servers).map((k) => [k, []]));
  for (let r = 0; r < rounds; r++) for (const [name, s] of Object.entries(servers)) out[name]!.push(await sampleDecode(s.url, prompt, tokens));
  return out;
}

function describe(samples: DecodeSample[]): object {
  const rates = samples.map((s) => s.decodeTokensPerSecond);
  return {
    decodeTokensPerSecond: { median: round(median(rates), 1), best: round(Math.max(...rates), 1) },
    timeToFirstTokenMs: round(median(samples.map((s) => s.ttftMs)), 1),
    tokensGenerated: samples.map((s) => s.tokens),
  };
}

/** Median over rounds of a.decode ÷ b.decode in the same round. */
function ratio(a: DecodeSample[], b: DecodeSample[]): number {
  return round(median(a.map((s, i) => s.decodeTokensPerSecond / b[i]!.decodeTokensPerSecond)));
}

/** A progress line on stderr (stdout carries only the JSON). */
function progress(what: string): void {
  console.error(`[engines ${new Date().toISOString()}] ${what}`);
}

function option(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

export async function run(args: string[]): Promise<object> {
  const hidden = option(args, "hidden", 512);
  const layers = option(args, "layers", 8);
  const tokens = option(args, "tokens", 64);
  const rounds = option(args, "rounds", 3);
  const launchRounds = option(args, "launch-rounds", 2);
  const cores = availableParallelism();
  const venv = await ensureMlxVenv();
  const dir = await mkdtemp(join(tmpdir(), "bench-engines-"));
  const running: Server[] = [];
  const loadBefore = loadavg();
  try {
    const shape = { layers, hidden, heads: hidden / 64, kvHeads: hidden / 128, intermediate: hidden * 3, vocab: 2048, seed: 7 };
    const qwenDir = join(dir, "qwen2");
    const llamaDir = join(dir, "llama");
    const qwen = await makeTestModel(qwenDir, { ...shape, family: "qwen2" });
    const llama = await makeTestModel(llamaDir, shape);
    const hubCache = join(dir, "hf-cache");

    // 1. mlx-lm: 2-rank pipeline vs one process, Qwen2.
    progress("mlx-lm: 2-rank pipeline vs one process (qwen2)");
    const mlxQwen = await startMlxSingle(venv.python, qwenDir, hubCache);
    running.push(mlxQwen);
    const ring = await startMlxRing(venv.python, qwenDir, dir, 2);
    running.push(ring);
    const pipeline = await measureDecode({ single: mlxQwen, ranks2: ring }, rounds, tokens);
    const sameText = pipeline.single!.every((s, i) => s.text === pipeline.ranks2![i]!.text);
    await Promise.all(running.splice(0).map((s) => s.stop()));

    // 2. shard-engine vs mlx-lm, one process each, Llama.
    progress("shard-engine vs mlx-lm, one process each (llama)");
    const mlxLlama = await startMlxSingle(venv.python, llamaDir, hubCache);
    running.push(mlxLlama);
    const shard1 = await startShardEngine(llamaDir, 1);
    running.push(shard1);
    const shardAll = await startShardEngine(llamaDir, cores);
    running.push(shardAll);
    const single = await measureDecode({ mlxLm: mlxLlama, shardEngineThreads1: shard1, shardEngineAllCores: shardAll }, rounds, tokens);
    await Promise.all(running.splice(0).map((s) => s.stop()));

    // 3. launch → Ready through the daemon.
    progress("launch → Ready through the daemon");
    // A launch that never gets Ready is reported as such rather than losing the figures above.
    const launch = await measureLaunchToReady([mlxLmKind(venv.python, qwenDir, venv.mlxLmVersion), shardEngineKind(llamaDir)], launchRounds).catch((error: unknown) => ({
      error: error instanceof Error ? error.message.slice(0, 2_000) : String(error),
    }));
    const launchMs = (kind: string): number => (launch as Record<string, { launchToReadyMs: { median: number } }>)[kind]!.launchToReadyMs.median;

    return {
      versions: { mlxLm: venv.mlxLmVersion, mlx: venv.mlxVersion, node: process.version },
      model: {
        ...shape,
        dtype: "f16",
        qwen2: { parameters: qwen.totalBytes / 2, weightMiB: round(qwen.totalBytes / 2 ** 20, 2) },
        llama: { parameters: llama.totalBytes / 2, weightMiB: round(llama.totalBytes / 2 ** 20, 2) },
      },
      prompt,
      tokensPerRequest: tokens,
      rounds,
      machine: { cores: cpus().length, loadAverageBefore: loadBefore.map((x) => round(x, 2)), loadAverageAfter: loadavg().map((x) => round(x, 2)) },
      method:
        "decode tok/s = (tokens − 1) ÷ (time of a max_tokens completion − time of a 1-token completion of the same prompt), greedy, non-streamed; ratios are medians of per-round ratios, deployments measured in interleaved rounds",
      mlxLmPipeline: {
        model: "qwen2",
        single: describe(pipeline.single!),
        ranks2: describe(pipeline.ranks2!),
        ranks2OverSingle: ratio(pipeline.ranks2!, pipeline.single!),
        sameGreedyText: sameText,
        readyAfterSpawnMs: { single: round(mlxQwen.startMs, 0), ranks2: round(ring.startMs, 0) },
        note: "both ranks and the single process on this machine's cores; rank 0 serves HTTP and holds the last layers",
      },
      shardEngineVsMlxLm: {
        model: "llama",
        mlxLm: describe(single.mlxLm!),
        shardEngineThreads1: describe(single.shardEngineThreads1!),
        [`shardEngineThreads${cores}`]: describe(single.shardEngineAllCores!),
        shardEngineOverMlxLm: { threads1: ratio(single.shardEngineThreads1!, single.mlxLm!), [`threads${cores}`]: ratio(single.shardEngineAllCores!, single.mlxLm!) },
        note: "mlx-lm with its default CPU threading; shard-engine computes in f32 from f16 weights, mlx-lm in f16",
      },
      launchToReady: {
        shape:
          "two stages on two loopback sshd nodes through the daemon; mlx-lm: 2 ranks (rank 0 serves HTTP); shard-engine: 2 stages + a coordinator process on this machine",
        rounds: launchRounds,
        ...launch,
        ...("error" in launch ? {} : { mlxLmOverShardEngine: round(launchMs("mlx-lm") / launchMs("shard-engine")) }),
      },
    };
  } finally {
    await Promise.all(running.map((s) => s.stop()));
    await rm(dir, { recursive: true, force: true });
  }
}
