import { execFile } from "node:child_process";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel, toBfloat16Bits, toFloat16Bits } from "../../src/planner/test-model/index.js";

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
  });
});
