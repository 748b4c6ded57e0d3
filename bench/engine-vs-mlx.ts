/**
 * The engine bench's comparison with MLX's mlx-lm: shard-engine in one process (1 thread and every
 * core) ÷ `mlx_lm.server` in one process, decode tokens/s on the bench's own f16 Llama model, in
 * interleaved rounds. It uses the pinned mlx-lm the test suite installs into `.venv-mlx`; without
 * it the figure says how to get it rather than installing for minutes inside a speed run.
 */
import { availableParallelism } from "node:os";
import { join } from "node:path";
import { findMlxVenv } from "../test/support/mlx-venv.js";
import { median, round, sampleDecode, type DecodeSample } from "./completion-timing.js";
import { startMlxSingle } from "./mlx-servers.js";

interface Server {
  url: string;
  stop(): Promise<void>;
}

/** Decode ratios against mlx-lm, or why there are none. */
export async function compareWithMlxLm(
  dir: string,
  modelDir: string,
  startShardEngine: (threads: number) => Promise<Server>,
  tokens: number,
  rounds: number,
): Promise<object> {
  const venv = await findMlxVenv();
  if (venv === undefined) {
    return {
      measured: false,
      why: "the pinned mlx-lm is not installed in .venv-mlx: `npm test` (or `npm run bench -- engines`) installs it; run this bench again afterwards",
    };
  }
  const cores = availableParallelism();
  const running: Server[] = [];
  try {
    const mlx = await startMlxSingle(venv.python, modelDir, join(dir, "hf-cache"));
    running.push(mlx);
    const one = await startShardEngine(1);
    running.push(one);
    const all = await startShardEngine(cores);
    running.push(all);
    const servers = { mlxLm: mlx, threads1: one, [`threads${cores}`]: all };
    const samples: Record<string, DecodeSample[]> = Object.fromEntries(Object.keys(servers).map((k) => [k, []]));
    for (const s of Object.values(servers)) await sampleDecode(s.url, "the", 8);
    for (let r = 0; r < rounds; r++) for (const [name, s] of Object.entries(servers)) samples[name]!.push(await sampleDecode(s.url, "the", tokens));
    const rate = (name: string): number => round(median(samples[name]!.map((s) => s.decodeTokensPerSecond)), 1);
    const over = (name: string): number => round(median(samples[name]!.map((s, i) => s.decodeTokensPerSecond / samples.mlxLm![i]!.decodeTokensPerSecond)));
    return {
      measured: true,
      versions: { mlxLm: venv.mlxLmVersion, mlx: venv.mlxVersion },
      decodeTokensPerSecond: Object.fromEntries(Object.keys(servers).map((k) => [k === "mlxLm" ? k : `shardEngine${k[0]!.toUpperCase()}${k.slice(1)}`, rate(k)])),
      shardEngineOverMlxLm: { threads1: over("threads1"), [`threads${cores}`]: over(`threads${cores}`) },
      // mlx-lm computes in f16, shard-engine in f32 from the f16 weights: on a random test model, whose
      // top logits lie close together, their greedy texts may part after a few tokens.
      sameGreedyText: samples.mlxLm!.every((s, i) => s.text === samples.threads1![i]!.text),
      method: `the bench's f16 model, one process each, mlx-lm with its default CPU threading; decode tok/s = (tokens − 1) ÷ (time of a ${tokens}-token completion − time of a 1-token one), medians of per-round ratios over ${rounds} interleaved rounds`,
    };
  } finally {
    await Promise.all(running.map((s) => s.stop()));
  }
}
