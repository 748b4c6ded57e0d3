import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { inspectModel } from "../../src/planner/index.js";
import { makeTestModel, toBfloat16Bits, toFloat16Bits } from "../../src/planner/test-model/index.js";
import { runMlxSnippet } from "../support/mlx-lm.js";

let root: string;
beforeAll(async () => {
  root = await mkdtemp(join(tmpdir(), "shardctl-test-model-"));
});
afterAll(async () => {
  await rm(root, { recursive: true, force: true });
});

type Header = Record<string, { dtype: string; shape: number[]; data_offsets: [number, number] }>;

async function readHeader(file: string): Promise<Header> {
  const bytes = await readFile(file);
  const length = Number(bytes.readBigUInt64LE(0));
  const header = JSON.parse(bytes.subarray(8, 8 + length).toString("utf8")) as Header & { __metadata__?: unknown };
  delete header.__metadata__;
  return header;
}

describe("makeTestModel", () => {
  it("is deterministic for a seed and differs across seeds", async () => {
    await makeTestModel(join(root, "a"), { seed: 7 });
    await makeTestModel(join(root, "b"), { seed: 7 });
    await makeTestModel(join(root, "c"), { seed: 8 });
    const [a, b, c] = await Promise.all(["a", "b", "c"].map((d) => readFile(join(root, d, "model.safetensors"))));
    expect(a!.equals(b!)).toBe(true);
    expect(a!.equals(c!)).toBe(false);
  });

  it("writes a sharded, quantized model whose index covers every tensor", async () => {
    const dir = join(root, "q4");
    const model = await makeTestModel(dir, { layers: 3, shards: 3, quantize: 4 });
    const index = JSON.parse(await readFile(join(dir, "model.safetensors.index.json"), "utf8")) as {
      metadata: { total_size: number };
      weight_map: Record<string, string>;
    };
    const files = [...new Set(Object.values(index.weight_map))].sort();
    expect(files).toHaveLength(3);
    let total = 0;
    const seen: string[] = [];
    for (const file of files) {
      const header = await readHeader(join(dir, file));
      for (const [name, tensor] of Object.entries(header)) {
        expect(index.weight_map[name]).toBe(file);
        total += tensor.data_offsets[1] - tensor.data_offsets[0];
        seen.push(name);
      }
    }
    expect(total).toBe(index.metadata.total_size);
    expect(total).toBe(model.totalBytes);
    expect(seen.sort()).toEqual(Object.keys(index.weight_map).sort());
    const header = await readHeader(join(dir, index.weight_map["model.layers.1.mlp.down_proj.weight"]!));
    // hidden 64, intermediate 128: packed [64, 128*4/32], scales/biases [64, 128/64]
    expect(header["model.layers.1.mlp.down_proj.weight"]).toMatchObject({ dtype: "U32", shape: [64, 16] });
    expect(header["model.layers.1.mlp.down_proj.scales"]).toMatchObject({ dtype: "F16", shape: [64, 2] });
    const config = JSON.parse(await readFile(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
    expect(config.quantization).toEqual({ group_size: 64, bits: 4 });
  });

  it("ships a tokenizer and chat template the Hugging Face libraries load", async () => {
    const dir = join(root, "tok");
    await makeTestModel(dir, { vocab: 300 });
    const tokenizerJson = JSON.parse(await readFile(join(dir, "tokenizer.json"), "utf8")) as object;
    const tokenizerConfig = JSON.parse(await readFile(join(dir, "tokenizer_config.json"), "utf8")) as {
      chat_template: string;
      bos_token: string;
    };
    const tokenizer = new Tokenizer(tokenizerJson, tokenizerConfig);
    const text = new Template(tokenizerConfig.chat_template).render({
      messages: [{ role: "user", content: "Héllo there!" }],
      add_generation_prompt: true,
      bos_token: tokenizerConfig.bos_token,
    });
    const ids = tokenizer.encode(text).ids;
    expect(ids[0]).toBe(256 + 24); // <|begin_of_text|> after the 256 bytes and 24 merges
    expect(Math.max(...ids)).toBeLessThan(300);
    expect(tokenizer.decode(ids)).toBe(text);
  });

  it("rounds floats the way IEEE half and bfloat16 do", () => {
    expect(toFloat16Bits(1)).toBe(0x3c00);
    expect(toFloat16Bits(-2)).toBe(0xc000);
    expect(toFloat16Bits(65504)).toBe(0x7bff);
    expect(toFloat16Bits(1e6)).toBe(0x7c00);
    expect(toFloat16Bits(5.960464477539063e-8)).toBe(0x0001);
    expect(toFloat16Bits(1 + 2 ** -11)).toBe(0x3c00); // halfway rounds to even
    expect(toBfloat16Bits(1)).toBe(0x3f80);
    expect(toBfloat16Bits(3.140625)).toBe(0x4049);
  });

  it("rewriting a directory leaves no weights of the earlier model behind", async () => {
    const dir = join(root, "again");
    await makeTestModel(dir, { shards: 3 });
    const model = await makeTestModel(dir, { shards: 1 });
    const { readdir } = await import("node:fs/promises");
    expect((await readdir(dir)).sort()).toEqual([...model.files].sort());
  });

  it("refuses impossible shapes with a clear message", async () => {
    await expect(makeTestModel(join(root, "bad"), { hidden: 60, heads: 8 })).rejects.toThrow("hidden (60) must be a multiple of heads (8)");
    await expect(makeTestModel(join(root, "bad2"), { quantize: 4, hidden: 96, heads: 4 })).rejects.toThrow(
      "quantized models need hidden and intermediate sizes that are multiples of 64",
    );
  });
});

describe("makeTestModel --family qwen2", () => {
  it("writes Qwen2's q/k/v biases, config and ChatML tokens, always with an index", async () => {
    const dir = join(root, "qwen2");
    const model = await makeTestModel(dir, { family: "qwen2", layers: 2 });
    expect(model.files.sort()).toEqual(["config.json", "model.safetensors", "model.safetensors.index.json", "tokenizer.json", "tokenizer_config.json"]);
    const header = await readHeader(join(dir, "model.safetensors"));
    expect(header["model.layers.1.self_attn.q_proj.bias"]).toMatchObject({ dtype: "F16", shape: [64] });
    expect(header["model.layers.1.self_attn.k_proj.bias"]).toMatchObject({ dtype: "F16", shape: [32] });
    expect(header["model.layers.1.self_attn.o_proj.bias"]).toBeUndefined();
    const index = JSON.parse(await readFile(join(dir, "model.safetensors.index.json"), "utf8")) as { weight_map: Record<string, string> };
    expect(Object.keys(index.weight_map).sort()).toEqual(Object.keys(header).sort());
    expect(model.config).toMatchObject({ model_type: "qwen2", rope_theta: 1_000_000, tie_word_embeddings: false, eos_token_id: [282, 280] });
    expect(model.config.head_dim).toBeUndefined();
    const tokenizerConfig = JSON.parse(await readFile(join(dir, "tokenizer_config.json"), "utf8")) as { chat_template: string; eos_token: string };
    expect(tokenizerConfig.eos_token).toBe("<|im_end|>");
    const text = new Template(tokenizerConfig.chat_template).render({ messages: [{ role: "user", content: "hi" }], add_generation_prompt: true });
    expect(text).toBe("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    expect(await inspectModel({ kind: "dir", path: dir })).toMatchObject({ family: "qwen2", layers: 2 });
  });

  it("loads and generates in mlx-lm, a Llama model too, quantized and tied", async () => {
    const models = {
      qwen2: await makeTestModel(join(root, "mlx-qwen2"), { family: "qwen2", tieWordEmbeddings: true }),
      qwen2q4: await makeTestModel(join(root, "mlx-qwen2-q4"), { family: "qwen2", quantize: 4, shards: 2 }),
      llama: await makeTestModel(join(root, "mlx-llama"), {}),
    };
    const code = [
      "import json",
      "from mlx_lm import load, generate",
      `for name, path in json.loads(${JSON.stringify(JSON.stringify(Object.fromEntries(Object.entries(models).map(([k, m]) => [k, m.dir]))))}).items():`,
      "    model, tokenizer = load(path)",
      "    generate(model, tokenizer, prompt=tokenizer.apply_chat_template([{'role': 'user', 'content': 'hi'}], add_generation_prompt=True), max_tokens=3)",
      "    print(name, type(model).__module__, hasattr(model.model, 'pipeline'))",
    ].join("\n");
    const out = await runMlxSnippet(code);
    expect(out.trim().split("\n")).toEqual(["qwen2 mlx_lm.models.qwen2 True", "qwen2q4 mlx_lm.models.qwen2 True", "llama mlx_lm.models.llama False"]);
  }, 600_000);
});

describe("shardctl make-test-model", () => {
  it("writes a model from the command line and rejects bad flags", async () => {
    const cli = join(process.cwd(), "dist/src/cli/shardctl.js");
    const run = promisify(execFile);
    const { stdout } = await run(process.execPath, [cli, "make-test-model", join(root, "cli"), "--layers", "2", "--shards", "2"]);
    expect(stdout).toMatch(/^wrote 6 files \(\d+ bytes of weights\)/);
    const failure = await run(process.execPath, [cli, "make-test-model", join(root, "cli2"), "--dtype", "f8"]).catch(
      (e: unknown) => e as { code: number; stderr: string },
    );
    expect(failure).toMatchObject({ code: 1, stderr: 'shardctl: expected --dtype to be f16, bf16 or f32, got "f8"\n' });
    const qwen = await run(process.execPath, [cli, "make-test-model", join(root, "cli-qwen"), "--family", "qwen2"]);
    expect(qwen.stdout).toMatch(/^wrote 5 files/);
    expect(JSON.parse(await readFile(join(root, "cli-qwen", "config.json"), "utf8"))).toMatchObject({ model_type: "qwen2" });
    const badFamily = await run(process.execPath, [cli, "make-test-model", join(root, "cli3"), "--family", "gpt2"]).catch(
      (e: unknown) => e as { code: number; stderr: string },
    );
    expect(badFamily).toMatchObject({ code: 1, stderr: 'shardctl: expected --family to be llama or qwen2, got "gpt2"\n' });
  });
});
