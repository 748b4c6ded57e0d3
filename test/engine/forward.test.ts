/**
 * The engine's logits against an independent forward pass written here with plain loops: its own
 * safetensors parsing, f16/bf16 decoding, MLX dequantization, RMSNorm, half-split RoPE (with
 * Llama-3 rope_scaling), grouped-query attention and SwiGLU. Agreement within 1e-4 on every logit,
 * and within 2e-3 on the log probabilities of the reference's five most likely tokens.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { readModelConfig, ModelShard } from "../../src/engine/model/index.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

type Tensors = Map<string, { dtype: string; shape: number[]; bytes: Buffer }>;

async function readAll(file: string): Promise<Tensors> {
  const buf = await readFile(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8")) as Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;
  const out: Tensors = new Map();
  for (const [name, t] of Object.entries(header)) {
    if (name === "__metadata__") continue;
    out.set(name, { dtype: t.dtype, shape: t.shape, bytes: buf.subarray(8 + n + t.data_offsets[0], 8 + n + t.data_offsets[1]) });
  }
  return out;
}

function half(bits: number): number {
  const sign = bits >> 15 ? -1 : 1;
  const e = (bits >> 10) & 31;
  const m = bits & 1023;
  if (e === 0) return sign * m * Math.pow(2, -24);
  return sign * Math.pow(2, e - 15) * (1 + m / 1024);
}

function decode(t: { dtype: string; bytes: Buffer }): number[] {
  const out: number[] = [];
  if (t.dtype === "F32") for (let i = 0; i < t.bytes.length; i += 4) out.push(t.bytes.readFloatLE(i));
  else if (t.dtype === "F16") for (let i = 0; i < t.bytes.length; i += 2) out.push(half(t.bytes.readUInt16LE(i)));
  else if (t.dtype === "BF16") {
    const b = Buffer.alloc(4);
    for (let i = 0; i < t.bytes.length; i += 2) {
      b.writeUInt32LE(t.bytes.readUInt16LE(i) * 65536);
      out.push(b.readFloatLE(0));
    }
  } else throw new Error(t.dtype);
  return out;
}

/** A dense [out][in] matrix, dequantizing MLX affine weights when scales are present. */
function matrix(ts: Tensors, prefix: string, bits: number | undefined): number[][] {
  const w = ts.get(`${prefix}.weight`)!;
  const [out, cols] = w.shape as [number, number];
  if (bits === undefined) {
    const v = decode(w);
    return Array.from({ length: out }, (_, o) => v.slice(o * cols, (o + 1) * cols));
  }
  const scales = decode(ts.get(`${prefix}.scales`)!);
  const biases = decode(ts.get(`${prefix}.biases`)!);
  const inDim = (cols * 32) / bits;
  const rows: number[][] = [];
  for (let o = 0; o < out; o++) {
    const row: number[] = [];
    for (let i = 0; i < inDim; i++) {
      const word = w.bytes.readUInt32LE((o * cols + Math.floor((i * bits) / 32)) * 4);
      const q = Math.floor(word / Math.pow(2, (i * bits) % 32)) % Math.pow(2, bits);
      const g = o * (inDim / 64) + Math.floor(i / 64);
      row.push(scales[g]! * q + biases[g]!);
    }
    rows.push(row);
  }
  return rows;
}

const mv = (m: number[][], x: number[]): number[] => m.map((row) => row.reduce((s, w, i) => s + w * x[i]!, 0));
const norm = (x: number[], w: number[], eps: number): number[] => {
  const r = 1 / Math.sqrt(x.reduce((s, v) => s + v * v, 0) / x.length + eps);
  return x.map((v, i) => v * r * w[i]!);
};

function referenceLogits(ts: Tensors, config: Record<string, unknown>, tokens: number[]): number[][] {
  const bits = (config.quantization as { bits: number } | undefined)?.bits;
  const L = config.num_hidden_layers as number;
  const nh = config.num_attention_heads as number,
    nkv = config.num_key_value_heads as number;
  const d = config.head_dim as number,
    eps = config.rms_norm_eps as number,
    theta = config.rope_theta as number;
  const inv: number[] = [];
  for (let i = 0; i < d / 2; i++) {
    let f = 1 / Math.pow(theta, (2 * i) / d);
    const rs = config.rope_scaling as Record<string, number> | undefined;
    if (rs) {
      const lowW = rs.original_max_position_embeddings! / rs.low_freq_factor!;
      const highW = rs.original_max_position_embeddings! / rs.high_freq_factor!;
      const wl = (2 * Math.PI) / f;
      if (wl > lowW) f = f / rs.factor!;
      else if (wl >= highW) {
        const sm = (rs.original_max_position_embeddings! / wl - rs.low_freq_factor!) / (rs.high_freq_factor! - rs.low_freq_factor!);
        f = (1 - sm) * (f / rs.factor!) + sm * f;
      }
    }
    inv.push(f);
  }
  const rope = (v: number[], pos: number): number[] => {
    const out = v.slice();
    for (let i = 0; i < d / 2; i++) {
      const c = Math.cos(pos * inv[i]!),
        s = Math.sin(pos * inv[i]!);
      out[i] = v[i]! * c - v[i + d / 2]! * s;
      out[i + d / 2] = v[i + d / 2]! * c + v[i]! * s;
    }
    return out;
  };
  const embed = matrix(ts, "model.embed_tokens", bits);
  let xs = tokens.map((t) => embed[t]!.slice());
  for (let l = 0; l < L; l++) {
    const p = `model.layers.${l}`;
    const get = (n: string): number[][] => matrix(ts, `${p}.${n}`, bits);
    const [wq, wk, wv, wo, wg, wu, wd] = [
      "self_attn.q_proj",
      "self_attn.k_proj",
      "self_attn.v_proj",
      "self_attn.o_proj",
      "mlp.gate_proj",
      "mlp.up_proj",
      "mlp.down_proj",
    ].map(get);
    const n1 = decode(ts.get(`${p}.input_layernorm.weight`)!),
      n2 = decode(ts.get(`${p}.post_attention_layernorm.weight`)!);
    const qs: number[][][] = [],
      ks: number[][][] = [],
      vs: number[][][] = [];
    xs.forEach((x, pos) => {
      const h = norm(x, n1, eps);
      const q = mv(wq!, h),
        k = mv(wk!, h),
        v = mv(wv!, h);
      qs.push(Array.from({ length: nh }, (_, i) => rope(q.slice(i * d, (i + 1) * d), pos)));
      ks.push(Array.from({ length: nkv }, (_, i) => rope(k.slice(i * d, (i + 1) * d), pos)));
      vs.push(Array.from({ length: nkv }, (_, i) => v.slice(i * d, (i + 1) * d)));
    });
    xs = xs.map((x, pos) => {
      const att: number[] = [];
      for (let hI = 0; hI < nh; hI++) {
        const kv = Math.floor(hI / (nh / nkv));
        const sc = Array.from({ length: pos + 1 }, (_, j) => qs[pos]![hI]!.reduce((s, q, i) => s + q * ks[j]![kv]![i]!, 0) / Math.sqrt(d));
        const m = Math.max(...sc);
        const e = sc.map((s) => Math.exp(s - m));
        const z = e.reduce((a, b) => a + b, 0);
        for (let i = 0; i < d; i++) att.push(e.reduce((s, w, j) => s + (w / z) * vs[j]![kv]![i]!, 0));
      }
      const x1 = x.map((v, i) => v + mv(wo!, att)[i]!);
      const h2 = norm(x1, n2, eps);
      const g = mv(wg!, h2),
        u = mv(wu!, h2);
      const act = g.map((gv, i) => (gv / (1 + Math.exp(-gv))) * u[i]!);
      const down = mv(wd!, act);
      return x1.map((v, i) => v + down[i]!);
    });
  }
  const head = config.tie_word_embeddings ? embed : matrix(ts, "lm_head", bits);
  const fn = decode(ts.get("model.norm.weight")!);
  return xs.map((x) => mv(head, norm(x, fn, eps)));
}

async function compare(options: Parameters<typeof makeTestModel>[1]): Promise<number> {
  const dir = await mkdtemp(join(tmpdir(), "engine-forward-"));
  dirs.push(dir);
  const model = await makeTestModel(dir, { layers: 2, hidden: 64, heads: 4, kvHeads: 2, vocab: 300, ...options });
  const ts = await readAll(join(dir, "model.safetensors"));
  const tokens = [5, 17, 260, 42, 99];
  const expected = referenceLogits(ts, model.config, tokens);
  const config = readModelConfig(dir);
  const shard = ModelShard.load(dir, config, { start: 0, end: config.layers });
  // Prompt in one batch, then the last token alone: both paths must agree with the reference.
  const cache = shard.createCache();
  const hidden = shard.embed(tokens.slice(0, 4));
  shard.forward(cache, hidden, 4);
  const one = shard.embed([tokens[4]!]);
  shard.forward(cache, one, 1);
  let worst = 0;
  for (const [row, logits] of [
    [2, shard.logits(hidden, 2)],
    [4, shard.logits(one, 0)],
  ] as const) {
    for (let i = 0; i < logits.length; i++) worst = Math.max(worst, Math.abs(logits[i]! - expected[row]![i]!));
    // The reference's five most likely tokens: the engine's log probabilities within 2e-3.
    const mine = logSoftmax([...logits]);
    const theirs = logSoftmax(expected[row]!);
    const top5 = [...theirs.keys()].sort((a, b) => theirs[b]! - theirs[a]!).slice(0, 5);
    for (const t of top5) expect(Math.abs(mine[t]! - theirs[t]!)).toBeLessThan(2e-3);
  }
  return worst;
}

function logSoftmax(logits: number[]): number[] {
  const max = Math.max(...logits);
  const log = Math.log(logits.reduce((s, v) => s + Math.exp(v - max), 0)) + max;
  return logits.map((v) => v - log);
}

describe("forward pass against an independent implementation", () => {
  it("f16, untied, plain RoPE", async () => {
    expect(await compare({ dtype: "f16", seed: 1 })).toBeLessThan(1e-4);
  });
  it("bf16, tied embeddings, llama3 rope_scaling", async () => {
    expect(await compare({ dtype: "bf16", seed: 2, tieWordEmbeddings: true, llama3RopeScaling: true, ropeTheta: 10000 })).toBeLessThan(1e-4);
  });
  it("f32", async () => {
    expect(await compare({ dtype: "f32", seed: 3 })).toBeLessThan(1e-4);
  });
  it("4-bit MLX quantized", async () => {
    expect(await compare({ quantize: 4, seed: 4 })).toBeLessThan(1e-4);
  });
  it("8-bit MLX quantized, tied", async () => {
    expect(await compare({ quantize: 8, seed: 5, tieWordEmbeddings: true })).toBeLessThan(1e-4);
  });
});

describe("a long prompt in chunks", () => {
  it("gives the logits of the prompt in one pass (the coordinator sends a long prompt in chunks)", async () => {
    const dir = await mkdtemp(join(tmpdir(), "engine-forward-chunks-"));
    dirs.push(dir);
    await makeTestModel(dir, { layers: 2, hidden: 64, heads: 4, kvHeads: 2, vocab: 300, dtype: "f16", seed: 6 });
    const config = readModelConfig(dir);
    const shard = ModelShard.load(dir, config, { start: 0, end: config.layers });
    // Chunks of 512: a last chunk of many rows (1200), and of one row, which takes the decode path (513).
    for (const length of [1200, 513]) {
      const tokens = Array.from({ length }, (_, i) => (i * 37 + 11) % 300);
      const whole = shard.createCache();
      const all = shard.embed(tokens);
      shard.forward(whole, all, tokens.length);
      const expected = [...shard.logits(all, tokens.length - 1)];
      const chunked = shard.createCache();
      let last: Float32Array = new Float32Array();
      for (let start = 0; start < tokens.length; start += 512) {
        const part = tokens.slice(start, start + 512);
        last = shard.embed(part);
        shard.forward(chunked, last, part.length);
      }
      expect([...shard.logits(last, (tokens.length % 512 || 512) - 1)], `${length} tokens`).toEqual(expected);
    }
  });
});
