/**
 * Test fixtures for the planner: temp dirs, hand-written (possibly broken) safetensors files and
 * an independent reading of safetensors headers, so tests do not trust the code under test.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll } from "vitest";

const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(dirs.map((d) => rm(d, { recursive: true, force: true })));
});

/** A fresh temp dir, removed after the test file. */
export async function tempDir(): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "shardctl-planner-"));
  dirs.push(dir);
  return dir;
}

/** Write a safetensors file from a raw header (object → JSON, or a literal string) and `dataBytes` zero bytes. */
export async function writeRawSafetensors(file: string, header: object | string, dataBytes: number, declaredLength?: bigint): Promise<void> {
  const json = Buffer.from(typeof header === "string" ? header : JSON.stringify(header), "utf8");
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(declaredLength ?? BigInt(json.length));
  await writeFile(file, Buffer.concat([prefix, json, Buffer.alloc(dataBytes)]));
}

/** A minimal Llama config.json. */
export function llamaConfig(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    model_type: "llama",
    num_hidden_layers: 2,
    hidden_size: 8,
    num_attention_heads: 2,
    num_key_value_heads: 1,
    vocab_size: 16,
    torch_dtype: "float16",
    ...overrides,
  };
}

/**
 * Every tensor of one layer of `llamaConfig()` (hidden 8, 2 heads, 1 key/value head, head_dim 4,
 * MLP inner size 8), float16, named as a Llama checkpoint names them.
 */
export function llamaLayer(layer: number, prefix = ""): Array<[name: string, dtype: "F16", shape: number[]]> {
  const p = `${prefix}model.layers.${layer}`;
  return [
    [`${p}.input_layernorm.weight`, "F16", [8]],
    [`${p}.self_attn.q_proj.weight`, "F16", [8, 8]],
    [`${p}.self_attn.k_proj.weight`, "F16", [4, 8]],
    [`${p}.self_attn.v_proj.weight`, "F16", [4, 8]],
    [`${p}.self_attn.o_proj.weight`, "F16", [8, 8]],
    [`${p}.post_attention_layernorm.weight`, "F16", [8]],
    [`${p}.mlp.gate_proj.weight`, "F16", [8, 8]],
    [`${p}.mlp.up_proj.weight`, "F16", [8, 8]],
    [`${p}.mlp.down_proj.weight`, "F16", [8, 8]],
  ];
}

export async function writeConfig(dir: string, config: Record<string, unknown>): Promise<void> {
  await writeFile(join(dir, "config.json"), JSON.stringify(config));
}

/** Header entries laid out back to back: name → [dtype, shape]. */
export function layoutHeader(tensors: Array<[name: string, dtype: "F16" | "F32" | "U32" | "F8_E4M3", shape: number[]]>): {
  header: Record<string, unknown>;
  dataBytes: number;
} {
  const size = { F16: 2, F32: 4, U32: 4, F8_E4M3: 1 };
  const entries: Array<[string, unknown]> = [];
  let offset = 0;
  for (const [name, dtype, shape] of tensors) {
    const bytes = shape.reduce((a, b) => a * b, 1) * size[dtype];
    entries.push([name, { dtype, shape, data_offsets: [offset, offset + bytes] }]);
    offset += bytes;
  }
  // fromEntries: a tensor named "__proto__" is a key of the header like any other, as JSON.parse makes it.
  return { header: Object.fromEntries(entries), dataBytes: offset };
}

/** Read a safetensors header independently of src/planner: tensor name → byte length. */
export async function readTensorSizes(file: string): Promise<Map<string, number>> {
  const buf = await readFile(file);
  const n = Number(buf.readBigUInt64LE(0));
  const header = JSON.parse(buf.subarray(8, 8 + n).toString("utf8")) as Record<string, { data_offsets?: [number, number] }>;
  const out = new Map<string, number>();
  for (const [name, entry] of Object.entries(header)) {
    if (name === "__metadata__" || entry.data_offsets === undefined) continue;
    out.set(name, entry.data_offsets[1] - entry.data_offsets[0]);
  }
  return out;
}
