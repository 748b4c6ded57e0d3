/**
 * shard-engine's own reading of safetensors headers (it runs without shardctl's checks, e.g. on a
 * node whose copy of a model was changed after it was planned): a tensor whose bytes do not match
 * its dtype and shape, offsets past the end of the file, offsets that are not whole numbers, and a
 * header that is not JSON are refused naming the file and the tensor, before any weight is used.
 * Before, a tensor shorter than its shape was loaded and the rest of it read from whatever followed
 * it in the engine's memory.
 */
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/index.js";
import { ModelShard, readModelConfig } from "../../src/engine/model/index.js";
import { requireBuild, spawnEngine } from "./support.js";

let dir: string;
let file: string;
let original: Buffer;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-malformed-model-"));
  await makeTestModel(dir, { layers: 2, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 3 });
  file = join(dir, "model.safetensors");
  original = await readFile(file);
});

afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

type Header = Record<string, { dtype: string; shape: number[]; data_offsets: unknown[] }>;

/** Write the model file again with its header changed by `edit` (the data bytes as they were). */
async function editHeader(edit: (header: Header) => void): Promise<void> {
  const length = Number(original.readBigUInt64LE(0));
  const header = JSON.parse(original.subarray(8, 8 + length).toString("utf8")) as Header;
  edit(header);
  const text = Buffer.from(JSON.stringify(header), "utf8");
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(text.length));
  await writeFile(file, Buffer.concat([prefix, text, original.subarray(8 + length)]));
}

function load(): ModelShard {
  return ModelShard.load(dir, readModelConfig(dir), { start: 0, end: 2 });
}

it("loads the model as written (the edits below are what breaks it)", async () => {
  await writeFile(file, original);
  expect(load().range).toEqual({ start: 0, end: 2 });
});

it("refuses a tensor that holds fewer bytes than its dtype and shape need", async () => {
  await editHeader((h) => {
    const t = h["lm_head.weight"]!;
    const begin = t.data_offsets[0] as number;
    t.data_offsets = [begin, begin + 16];
  });
  expect(load).toThrow(/model\.safetensors: tensor "lm_head\.weight" holds 16 bytes but F16 shape \[320, 64\] needs 40960/);
});

it("refuses data_offsets past the end of the file, as a truncated file or a wrong header", async () => {
  await editHeader((h) => {
    h["lm_head.weight"]!.data_offsets = [1e12, 1e12 + 40960];
  });
  expect(load).toThrow(/tensor "lm_head\.weight" data_offsets \[1000000000000, 1000000040960\] run past the end of the file's data \(\d+ bytes\)/);
});

it("refuses data_offsets that are not two whole numbers in order", async () => {
  for (const offsets of [[-16, 0], [0.5, 2.5], ["0", "16"], [32, 16], [0]]) {
    await editHeader((h) => {
      h["model.norm.weight"]!.data_offsets = offsets;
    });
    expect(load, JSON.stringify(offsets)).toThrow(/tensor "model\.norm\.weight" has data_offsets .* not two whole numbers \[begin, end\] with begin <= end/);
  }
});

it("refuses a header that is not JSON, and says so without quoting it", async () => {
  const text = Buffer.from("password=hunter2 {", "utf8");
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(text.length));
  await writeFile(file, Buffer.concat([prefix, text]));
  expect(load).toThrow(/model\.safetensors: the safetensors header is not valid JSON$/);
  expect(load).not.toThrow(/hunter2/);
});

it("the engine exits at start naming the file and the tensor", async () => {
  requireBuild();
  await editHeader((h) => {
    const t = h["lm_head.weight"]!;
    const begin = t.data_offsets[0] as number;
    t.data_offsets = [begin, begin + 16];
  });
  const engine = spawnEngine(["-m", dir, "--host", "127.0.0.1", "--port", "0", "--no-warmup", "--threads", "1"]);
  expect(await engine.exited).toBe(1);
  expect(engine.stderr()).toMatch(/model\.safetensors: tensor \\?"lm_head\.weight\\?" holds 16 bytes but F16 shape \[320, 64\] needs 40960/);
}, 30_000);

it("a tokenizer.json cut short: the engine exits naming the file and where it breaks, quoting none of it", async () => {
  requireBuild();
  await writeFile(file, original);
  const tokenizer = join(dir, "tokenizer.json");
  const whole = await readFile(tokenizer);
  try {
    await writeFile(tokenizer, whole.subarray(0, 500));
    const engine = spawnEngine(["-m", dir, "--host", "127.0.0.1", "--port", "0", "--no-warmup", "--threads", "1"]);
    expect(await engine.exited).toBe(1);
    expect(engine.stderr()).toMatch(
      /tokenizer\.json is not valid JSON \((it breaks at character \d+ of 500|it ends too soon \(500 characters\))\): the file is damaged or cut short; copy it again/,
    );
    expect(engine.stderr()).not.toContain(whole.subarray(480, 500).toString("utf8"));
  } finally {
    await writeFile(tokenizer, whole);
  }
}, 30_000);
