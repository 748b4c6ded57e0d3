/**
 * `npm run bench -- planner [runs]`: (1) plan a 126-layer, 405B-class model (synthetic bf16
 * safetensors headers parsed by the planner's own parser) over 30 nodes with mixed budgets, both
 * strategies, median/p95 ms; the equal split on the same input is the baseline of the memory
 * split's ratio. (2) inspect a 20-shard model over HTTP (the Hub stand-in from test/support):
 * requests per shard and ms, against inspecting the same model from a local directory.
 * Goals: plan < 20 ms; 2 requests per shard.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  buildModelProfile,
  inspectModel,
  makeTestModel,
  parseModelConfig,
  parseSafetensorsHeader,
  planShards,
  type HeaderFile,
  type ModelProfile,
  type PlanNode,
} from "../src/planner/index.js";
import { startHubServer } from "../test/support/hub-server.js";
import { allocateHost } from "../test/support/test-world.js";

const GiB = 1024 ** 3;

export async function run(args: string[]): Promise<object> {
  const runs = Number(args[0] ?? 200);
  const build = timeOnce(() => build405bProfile());
  const profile = build.value;
  const nodes: PlanNode[] = Array.from({ length: 30 }, (_, i) => ({
    name: `studio-${i + 1}`,
    memoryBytes: [64, 96, 128, 192, 256][i % 5]! * GiB,
    accelerator: "apple-m2-ultra",
  }));
  const base = { contextLength: 8192, maxSequences: 4, allowUnvalidatedFamily: false } as const;
  const equalMs = sample(runs, () => planShards(profile, nodes, { ...base, strategy: "equal", engine: "mlxcel" }));
  const memoryMs = sample(runs, () => planShards(profile, nodes, { ...base, strategy: "memory", engine: "reference" }));
  const equalPlan = planShards(profile, nodes, { ...base, strategy: "equal", engine: "mlxcel" });
  const memoryPlan = planShards(profile, nodes, { ...base, strategy: "memory", engine: "reference" });

  const http = await benchHttp(Math.max(5, Math.min(30, Math.floor(runs / 10))));
  return {
    plan: {
      model: { layers: profile.layers, files: profile.files.length, weightGiB: round(profile.totalBytes / GiB, 1) },
      nodes: nodes.length,
      runs,
      profileFromHeadersMs: round(build.ms, 2),
      equal: { ...stats(equalMs), maxFit: round(equalPlan.totals.maxFit ?? Number.NaN, 3), feasible: equalPlan.feasible, errors: reasonsOf(equalPlan.errors) },
      memory: { ...stats(memoryMs), maxFit: round(memoryPlan.totals.maxFit ?? Number.NaN, 3), feasible: memoryPlan.feasible, errors: reasonsOf(memoryPlan.errors) },
      memoryVsEqualMedianRatio: round(median(memoryMs) / median(equalMs), 2),
      maxFitImprovement: round((equalPlan.totals.maxFit ?? 0) / (memoryPlan.totals.maxFit ?? 1), 2),
      goalMs: 20,
      goalMet: percentile(memoryMs, 0.95) < 20 && percentile(equalMs, 0.95) < 20,
    },
    http,
  };
}

/** 405B-class Llama: hidden 16384, 128 heads, 8 KV heads, intermediate 53248, vocab 128256, bf16; 2 layers per file. */
function build405bProfile(): ModelProfile {
  const hidden = 16384;
  const kvDim = 8 * 128;
  const inter = 53248;
  const vocab = 128256;
  const layers = 126;
  const files: Array<Array<[string, number[]]>> = [];
  let current: Array<[string, number[]]> = [["model.embed_tokens.weight", [vocab, hidden]]];
  for (let l = 0; l < layers; l++) {
    const p = `model.layers.${l}`;
    current.push(
      [`${p}.input_layernorm.weight`, [hidden]],
      [`${p}.self_attn.q_proj.weight`, [hidden, hidden]],
      [`${p}.self_attn.k_proj.weight`, [kvDim, hidden]],
      [`${p}.self_attn.v_proj.weight`, [kvDim, hidden]],
      [`${p}.self_attn.o_proj.weight`, [hidden, hidden]],
      [`${p}.post_attention_layernorm.weight`, [hidden]],
      [`${p}.mlp.gate_proj.weight`, [inter, hidden]],
      [`${p}.mlp.up_proj.weight`, [inter, hidden]],
      [`${p}.mlp.down_proj.weight`, [hidden, inter]],
    );
    if (l % 2 === 1) {
      files.push(current);
      current = [];
    }
  }
  current.push(["model.norm.weight", [hidden]], ["lm_head.weight", [vocab, hidden]]);
  files.push(current);

  const headers: HeaderFile[] = files.map((tensors, i) => {
    const header: Record<string, unknown> = { __metadata__: { format: "mlx" } };
    let offset = 0;
    for (const [name, shape] of tensors) {
      const bytes = shape.reduce((a, b) => a * b, 1) * 2;
      header[name] = { dtype: "BF16", shape, data_offsets: [offset, offset + bytes] };
      offset += bytes;
    }
    const json = Buffer.from(JSON.stringify(header));
    const path = `model-${String(i + 1).padStart(5, "0")}-of-${String(files.length).padStart(5, "0")}.safetensors`;
    return { path, header: parseSafetensorsHeader(json, path, 8 + json.length + offset) };
  });
  const config = parseModelConfig({
    model_type: "llama",
    num_hidden_layers: layers,
    hidden_size: hidden,
    num_attention_heads: 128,
    num_key_value_heads: 8,
    intermediate_size: inter,
    vocab_size: vocab,
    torch_dtype: "bfloat16",
  });
  return buildModelProfile("synthetic-405b", config, headers);
}

async function benchHttp(runs: number): Promise<object> {
  const dir = await mkdtemp(join(tmpdir(), "shardctl-bench-planner-"));
  const hub = await startHubServer({ host: await allocateHost(), repos: [{ repo: "bench/tiny-20", commit: "c".repeat(40), dir }] });
  try {
    await makeTestModel(dir, { layers: 20, shards: 20, quantize: 4 });
    const source = { kind: "hub", endpoint: hub.endpoint, repo: "bench/tiny-20", revision: "main" } as const;
    await inspectModel(source); // warm the server's hash cache and the connection pool
    hub.resetStats();
    const first = await inspectModel(source);
    const once = hub.stats();
    const shardPaths = first.files.map((f) => `/bench/tiny-20/resolve/main/${f.path}`);
    const perShard = shardPaths.map((p) => once.requestsByPath[p] ?? 0);
    const httpMs: number[] = [];
    const localMs: number[] = [];
    for (let i = 0; i < runs; i++) {
      let t = performance.now();
      await inspectModel(source);
      httpMs.push(performance.now() - t);
      t = performance.now();
      await inspectModel({ kind: "dir", path: dir });
      localMs.push(performance.now() - t);
    }
    return {
      shards: first.files.length,
      requestsPerInspection: once.requests,
      requestsPerShard: { min: Math.min(...perShard), max: Math.max(...perShard) },
      expectedRequests: 2 * first.files.length + 2,
      bytesServed: once.bytesServed,
      modelBytes: first.totalBytes,
      runs,
      httpMs: stats(httpMs),
      localDirMs: stats(localMs),
      httpVsLocalMedianRatio: round(median(httpMs) / median(localMs), 2),
      goalMet: Math.max(...perShard) === 2 && Math.min(...perShard) === 2,
    };
  } finally {
    await hub.close();
    await rm(dir, { recursive: true, force: true });
  }
}

function reasonsOf(messages: ReadonlyArray<{ reason: string }>): string[] {
  return [...new Set(messages.map((m) => m.reason))];
}

function timeOnce<T>(fn: () => T): { value: T; ms: number } {
  const t = performance.now();
  const value = fn();
  return { value, ms: performance.now() - t };
}

function sample(runs: number, fn: () => unknown): number[] {
  for (let i = 0; i < Math.min(20, runs); i++) fn(); // warm-up (JIT)
  const out: number[] = [];
  for (let i = 0; i < runs; i++) {
    const t = performance.now();
    fn();
    out.push(performance.now() - t);
  }
  return out;
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))] ?? Number.NaN;
}

function median(values: number[]): number {
  return percentile(values, 0.5);
}

function stats(values: number[]): { medianMs: number; p95Ms: number } {
  return { medianMs: round(median(values), 3), p95Ms: round(percentile(values, 0.95), 3) };
}

function round(value: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(value * f) / f;
}
