import { mkdir, readdir, readFile, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { filesForStage, inspectModel, makeTestModel, type ModelProfile } from "../../src/planner/index.js";
import { layoutHeader, llamaConfig, llamaLayer, readTensorSizes, tempDir, writeConfig, writeRawSafetensors } from "./fixtures.js";

/** Sum the tensor bytes of every safetensors file in `dir`, per layer, read independently. */
async function independentSums(dir: string): Promise<{ layers: Map<number, number>; embed: number; norm: number; lmHead: number; total: number }> {
  const layers = new Map<number, number>();
  let embed = 0;
  let norm = 0;
  let lmHead = 0;
  let total = 0;
  for (const name of (await readdir(dir)).filter((f) => f.endsWith(".safetensors"))) {
    for (const [tensor, bytes] of await readTensorSizes(join(dir, name))) {
      total += bytes;
      const m = /^model\.layers\.(\d+)\./.exec(tensor);
      if (m !== null) layers.set(Number(m[1]), (layers.get(Number(m[1])) ?? 0) + bytes);
      else if (tensor.startsWith("model.embed_tokens.")) embed += bytes;
      else if (tensor.startsWith("model.norm.")) norm += bytes;
      else if (tensor.startsWith("lm_head.")) lmHead += bytes;
    }
  }
  return { layers, embed, norm, lmHead, total };
}

function expectSums(profile: ModelProfile, sums: Awaited<ReturnType<typeof independentSums>>): void {
  expect(profile.layerBytes).toEqual([...sums.layers.keys()].sort((a, b) => a - b).map((k) => sums.layers.get(k)));
  expect(profile.embeddingBytes).toBe(sums.embed);
  expect(profile.normBytes).toBe(sums.norm);
  expect(profile.lmHeadBytes).toBe(sums.lmHead);
  expect(profile.totalBytes).toBe(sums.total);
}

async function expectFailure(promise: Promise<unknown>, reason: string, message: string | RegExp): Promise<void> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(isShardctlError(error), `expected a ShardctlError ${reason}, got ${String(error)}`).toBe(true);
  if (!isShardctlError(error)) return;
  expect(error.reason).toBe(reason);
  if (typeof message === "string") expect(error.message).toContain(message);
  else expect(error.message).toMatch(message);
}

describe("inspectModel on a local directory", () => {
  it("reads config.json and per-layer bytes equal to sums taken from the header independently (f16, single file)", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 5, hidden: 64, heads: 4, kvHeads: 2, vocab: 300, dtype: "f16" });
    const profile = await inspectModel({ kind: "dir", path: dir });
    expectSums(profile, await independentSums(dir));
    expect(profile.layers).toBe(5);
    expect(profile.family).toBe("llama");
    expect(profile.config).toMatchObject({ hiddenSize: 64, heads: 4, kvHeads: 2, headDim: 16, vocabSize: 300, tieWordEmbeddings: false });
    expect(profile.dtype).toBe("F16");
    expect(profile.kvBytesPerElement).toBe(2);
    expect(profile.files.map((f) => f.path)).toEqual(["model.safetensors"]);
    // Layer 0 by hand: 2 norms (64) + q,o (64×64) + k,v (32×64) + gate,up,down (128×64), 2 bytes each.
    expect(profile.layerBytes[0]).toBe((2 * 64 + 2 * 64 * 64 + 2 * 32 * 64 + 3 * 128 * 64) * 2);
  });

  it("handles a sharded 4-bit model: scales/biases counted, per-file layers, index agreement", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 6, quantize: 4, shards: 4, dtype: "bf16" });
    const profile = await inspectModel({ kind: "dir", path: dir });
    expectSums(profile, await independentSums(dir));
    expect(profile.files).toHaveLength(4);
    expect(profile.config.quantization).toEqual({ groupSize: 64, bits: 4, mode: "affine", overrides: {} });
    expect(profile.dtype).toBe("BF16");
    // Every layer appears in some file, and each file's size matches the file on disk.
    const covered = new Set(profile.files.flatMap((f) => f.layers));
    expect([...covered].sort((a, b) => a - b)).toEqual([0, 1, 2, 3, 4, 5]);
    for (const f of profile.files) expect(f.sizeBytes).toBe((await readFile(join(dir, f.path))).length);
    // Quantized layer: packed U32 weights plus F16-sized scales and biases.
    const file = profile.files.find((f) => f.tensors.includes("model.layers.3.self_attn.q_proj.scales"))!.path;
    const sizes = await readTensorSizes(join(dir, file));
    expect(sizes.get("model.layers.3.self_attn.q_proj.scales")).toBe(64 * 1 * 2);
    expect(sizes.get("model.layers.3.self_attn.q_proj.weight")).toBe((64 * 64 * 4) / 8);
  });

  it("handles an 8-bit f32 model: KV element size comes from the scales dtype", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 2, quantize: 8, dtype: "f32" });
    const profile = await inspectModel({ kind: "dir", path: dir });
    expectSums(profile, await independentSums(dir));
    expect(profile.dtype).toBe("F32");
    expect(profile.kvBytesPerElement).toBe(4);
  });

  it("tied embeddings: no lm_head, the last stage also needs the embedding file", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 4, shards: 3, tieWordEmbeddings: true });
    const profile = await inspectModel({ kind: "dir", path: dir });
    expect(profile.lmHeadBytes).toBe(0);
    expect(profile.config.tieWordEmbeddings).toBe(true);
    const embeddingFile = profile.files.find((f) => f.embedding)!.path;
    const last = filesForStage(profile, { layers: [3, 4], first: false, last: true });
    expect(last).toContain(embeddingFile);
    expect(last).toContain(profile.files.find((f) => f.norm)!.path);
  });

  it("filesForStage lists exactly the files holding a stage's layers plus embedding / head", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 8, shards: 4 });
    const profile = await inspectModel({ kind: "dir", path: dir });
    const index = JSON.parse(await readFile(join(dir, "model.safetensors.index.json"), "utf8")) as { weight_map: Record<string, string> };
    const expected = (start: number, end: number, first: boolean, last: boolean): string[] => {
      const files = new Set<string>();
      for (const [tensor, file] of Object.entries(index.weight_map)) {
        const m = /^model\.layers\.(\d+)\./.exec(tensor);
        if (m !== null && Number(m[1]) >= start && Number(m[1]) < end) files.add(file);
        if (first && tensor.startsWith("model.embed_tokens.")) files.add(file);
        if (last && (tensor.startsWith("model.norm.") || tensor.startsWith("lm_head."))) files.add(file);
      }
      return [...files].sort();
    };
    expect(filesForStage(profile, { layers: [0, 4], first: true, last: false })).toEqual(expected(0, 4, true, false));
    expect(filesForStage(profile, { layers: [4, 8], first: false, last: true })).toEqual(expected(4, 8, false, true));
    expect(filesForStage(profile, { layers: [2, 3], first: false, last: false })).toEqual(expected(2, 3, false, false));
  });

  it("reads the language model fields from text_config and language_model.* tensor names", async () => {
    const dir = await tempDir();
    await writeConfig(dir, { model_type: "llava", text_config: llamaConfig({ model_type: "llama" }) });
    const { header, dataBytes } = layoutHeader([
      ["language_model.model.embed_tokens.weight", "F16", [16, 8]],
      ...llamaLayer(0, "language_model."),
      ...llamaLayer(1, "language_model."),
      ["language_model.model.norm.weight", "F16", [8]],
      ["language_model.lm_head.weight", "F16", [16, 8]],
      ["vision_tower.encoder.layers.0.weight", "F16", [4]],
    ]);
    await writeRawSafetensors(join(dir, "model.safetensors"), header, dataBytes);
    const profile = await inspectModel({ kind: "dir", path: dir });
    expect(profile.family).toBe("llama");
    expect(profile.tensorPrefix).toBe("language_model.");
    // 2 norms of 8, q and o 8×8, k and v 4×8, gate, up and down 8×8; 2 bytes each.
    expect(profile.layerBytes).toEqual([800, 800]);
    expect(profile.otherBytes).toBe(8);
  });
});

describe("inspectModel refuses broken and non-MLX models with a clear reason", () => {
  async function modelWith(header: object | string, dataBytes: number, config = llamaConfig(), declared?: bigint): Promise<string> {
    const dir = await tempDir();
    await writeConfig(dir, config);
    await writeRawSafetensors(join(dir, "model.safetensors"), header, dataBytes, declared);
    return dir;
  }
  const good = (): ReturnType<typeof layoutHeader> =>
    layoutHeader([
      ["model.embed_tokens.weight", "F16", [16, 8]],
      ["model.layers.0.mlp.up_proj.weight", "F16", [8, 8]],
      ["model.layers.1.mlp.up_proj.weight", "F16", [8, 8]],
      ["model.norm.weight", "F16", [8]],
    ]);

  it("ModelConfigMissing when config.json is absent", async () => {
    const other = await tempDir();
    await writeRawSafetensors(join(other, "model.safetensors"), good().header, good().dataBytes);
    await expectFailure(inspectModel({ kind: "dir", path: other }), "ModelConfigMissing", `${other}: config.json not found`);
  });

  it("ModelSourceUnreachable (transient) when the directory does not exist", async () => {
    const dir = join(await tempDir(), "nope");
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "ModelSourceUnreachable", `model directory ${dir} does not exist`);
  });

  it('ModelSourceUnreachable naming a file given for the directory (id = ".../config.json")', async () => {
    const file = join(await tempDir(), "config.json");
    await writeFile(file, "{}");
    await expectFailure(inspectModel({ kind: "dir", path: file }), "ModelSourceUnreachable", `${file} is a file, not a model directory`);
  });

  it("ModelConfigInvalid when a required field is missing", async () => {
    const { header, dataBytes } = good();
    const config = llamaConfig();
    delete config.num_hidden_layers;
    const dir = await modelWith(header, dataBytes, config);
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "ModelConfigInvalid", "config.json: num_hidden_layers is missing");
  });

  it("SafetensorsHeaderInvalid: header length beyond the file size", async () => {
    const { header, dataBytes } = good();
    const dir = await modelWith(header, dataBytes, llamaConfig(), 1_000_000n);
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "SafetensorsHeaderInvalid",
      /model\.safetensors: header length 1000000 bytes exceeds the file size \(\d+ bytes\)/,
    );
  });

  it("SafetensorsHeaderInvalid: header larger than 100 MB", async () => {
    const { header, dataBytes } = good();
    const dir = await modelWith(header, dataBytes, llamaConfig(), 200_000_000n);
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "SafetensorsHeaderInvalid", "header length 200000000 bytes exceeds the 100 MB limit");
  });

  it("SafetensorsHeaderInvalid: header is not JSON", async () => {
    const dir = await modelWith("{not json!", 0);
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "SafetensorsHeaderInvalid", `${dir}/model.safetensors: header is not valid JSON`);
  });

  it("ModelFileInvalid and SafetensorsHeaderInvalid never quote the file: a model path may name one its asker cannot read", async () => {
    const dir = await tempDir();
    await writeFile(join(dir, "config.json"), "password=hunter2 and more");
    const error = await inspectModel({ kind: "dir", path: dir }).catch((e: unknown) => e);
    expect(isShardctlError(error) && error.reason).toBe("ModelFileInvalid");
    expect((error as Error).message).toBe(`${dir}/config.json: not valid JSON (Unexpected token 'p')`);
    const headerDir = await modelWith("password=hunter2 {", 0);
    const header = await inspectModel({ kind: "dir", path: headerDir }).catch((e: unknown) => e);
    expect((header as Error).message).toContain(`${headerDir}/model.safetensors: header is not valid JSON`);
    expect((header as Error).message).not.toContain("hunter2");
  });

  it("SafetensorsHeaderInvalid: a file shorter than 8 bytes", async () => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    await writeFile(join(dir, "model.safetensors"), Buffer.from([1, 2, 3]));
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "SafetensorsHeaderInvalid", "file is 3 bytes, too short for a safetensors header");
  });

  it("SafetensorsHeaderInvalid: overlapping data offsets", async () => {
    const { header, dataBytes } = good();
    (header["model.layers.1.mlp.up_proj.weight"] as { data_offsets: number[] }).data_offsets = [300, 428];
    const dir = await modelWith(header, dataBytes);
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "SafetensorsHeaderInvalid",
      /"model\.layers\.1\.mlp\.up_proj\.weight" data_offsets \[300, 428\] overlap "model\.layers\.0\.mlp\.up_proj\.weight" \[256, 384\]/,
    );
  });

  it("SafetensorsHeaderInvalid: data offsets beyond the data buffer", async () => {
    const { header, dataBytes } = good();
    const dir = await modelWith(header, dataBytes - 10);
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "SafetensorsHeaderInvalid",
      `tensor "model.norm.weight" data_offsets [512, 528] are out of range (data buffer is ${dataBytes - 10} bytes)`,
    );
  });

  it("SafetensorsHeaderInvalid: byte length disagrees with dtype × shape", async () => {
    const { header, dataBytes } = good();
    (header["model.norm.weight"] as { shape: number[] }).shape = [9];
    const dir = await modelWith(header, dataBytes);
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "SafetensorsHeaderInvalid", `tensor "model.norm.weight" holds 16 bytes but F16 shape [9] needs 18`);
  });

  it("ModelLayerIndexMissing: a layer tensor without an index", async () => {
    const { header, dataBytes } = layoutHeader([
      ["model.embed_tokens.weight", "F16", [16, 8]],
      ["model.layers.0.mlp.up_proj.weight", "F16", [8, 8]],
      ["model.layers.mlp.up_proj.weight", "F16", [8, 8]],
    ]);
    const dir = await modelWith(header, dataBytes);
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "ModelLayerIndexMissing",
      `model.safetensors: tensor "model.layers.mlp.up_proj.weight" has no layer index`,
    );
  });

  it("ModelLayerCountMismatch: config says 3 layers, the headers hold 2", async () => {
    const { header, dataBytes } = good();
    const dir = await modelWith(header, dataBytes, llamaConfig({ num_hidden_layers: 3 }));
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "ModelLayerCountMismatch",
      "config.json says num_hidden_layers = 3 but the safetensors hold 2 layer indices (missing 2)",
    );
  });

  it("ModelLayerCountMismatch: layer indices beyond the configured count", async () => {
    const { header, dataBytes } = good();
    const dir = await modelWith(header, dataBytes, llamaConfig({ num_hidden_layers: 1 }));
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "ModelLayerCountMismatch", "(beyond the count: 1)");
  });

  it("ModelNotMlx: PyTorch-style tensor names (transformer.h.0)", async () => {
    const { header, dataBytes } = layoutHeader([
      ["transformer.wte.weight", "F16", [16, 8]],
      ["transformer.h.0.attn.c_attn.weight", "F16", [8, 8]],
      ["transformer.h.1.attn.c_attn.weight", "F16", [8, 8]],
    ]);
    const dir = await modelWith(header, dataBytes, llamaConfig({ model_type: "gpt2" }));
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "ModelNotMlx",
      `found PyTorch/GGUF-style names such as "model.safetensors: transformer.h.0.attn.c_attn.weight"`,
    );
  });

  it("ModelNotMlx: only pytorch_model.bin", async () => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    await writeFile(join(dir, "pytorch_model.bin"), Buffer.alloc(16));
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "ModelNotMlx",
      'neither model.safetensors nor model.safetensors.index.json exists — not an MLX-format model (config.json + safetensors); found "pytorch_model.bin"',
    );
  });

  it("ModelNotMlx: only a .gguf file", async () => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    await mkdir(join(dir, "gguf"));
    await writeFile(join(dir, "gguf", "model-q4.gguf"), Buffer.alloc(16));
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "ModelNotMlx", 'found "gguf/model-q4.gguf"');
  });

  it("ModelIndexInvalid: the index names a file that does not exist", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 2, shards: 2 });
    const indexPath = join(dir, "model.safetensors.index.json");
    const index = JSON.parse(await readFile(indexPath, "utf8")) as { weight_map: Record<string, string> };
    index.weight_map["model.norm.weight"] = "model-00009-of-00009.safetensors";
    await writeFile(indexPath, JSON.stringify(index));
    await expectFailure(inspectModel({ kind: "dir", path: dir }), "ModelIndexInvalid", "refers to model-00009-of-00009.safetensors, which does not exist");
  });

  it("ModelIndexInvalid: the index disagrees with a header", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 2, shards: 2 });
    const indexPath = join(dir, "model.safetensors.index.json");
    const index = JSON.parse(await readFile(indexPath, "utf8")) as { weight_map: Record<string, string> };
    const files = [...new Set(Object.values(index.weight_map))].sort();
    index.weight_map["model.norm.weight"] = files[0]!;
    await writeFile(indexPath, JSON.stringify(index));
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "ModelIndexInvalid",
      `tensor "model.norm.weight" is in ${files[1]} but the weight_map says ${files[0]}`,
    );
  });

  it("ModelIndexInvalid: a weight_map path that escapes the model directory", async () => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    await writeFile(join(dir, "model.safetensors.index.json"), JSON.stringify({ weight_map: { "model.norm.weight": "../x.safetensors" } }));
    await expectFailure(
      inspectModel({ kind: "dir", path: dir }),
      "ModelIndexInvalid",
      `weight_map["model.norm.weight"] = "../x.safetensors" is not a safetensors file name`,
    );
  });

  it("errors are terminal except an unreachable source", async () => {
    const dir = await modelWith("{not json!", 0);
    const error = await inspectModel({ kind: "dir", path: dir }).catch((e: unknown) => e);
    expect(isShardctlError(error) && error.terminal).toBe(true);
  });
});

describe("config.json details", () => {
  it("null fields fall back to defaults; head_dim defaults to hidden / heads, kv heads to heads", async () => {
    const dir = await tempDir();
    // As many key/value heads as heads, so the defaults describe the same tensors.
    await makeTestModel(dir, { layers: 2, kvHeads: 4 });
    const config = JSON.parse(await readFile(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
    await writeConfig(dir, { ...config, head_dim: null, num_key_value_heads: null, sliding_window: null });
    const profile = await inspectModel({ kind: "dir", path: dir });
    expect(profile.config).toMatchObject({ headDim: 16, kvHeads: 4, slidingLayers: [] });
    expect(profile.config.slidingWindow).toBeUndefined();
  });

  it("ModelNotMlx for GPTQ/AWQ-style quantization_config without MLX quantization", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 2 });
    const config = JSON.parse(await readFile(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
    await writeConfig(dir, { ...config, quantization_config: { quant_method: "gptq", bits: 4 } });
    const error = await inspectModel({ kind: "dir", path: dir }).catch((e: unknown) => e);
    expect(isShardctlError(error, "ModelNotMlx")).toBe(true);
    expect((error as Error).message).toContain(`quantized with "gptq" (quantization_config), not MLX affine quantization`);
  });
});
