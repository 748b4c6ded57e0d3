/**
 * What the engine a plan is for cannot load is refused at plan time, not at every launch: shards
 * named by a path and a context that is no positive number of tokens for every engine (inspection
 * refuses them); for the reference engine (shard-engine) what its own loader cannot read, as the
 * plan error ModelUnsupportedByEngine (F8 weights, no intermediate_size, a rope_scaling other than
 * Llama 3's, quantization its kernels do not unpack). Each case is checked against shard-engine's
 * own loader (src/engine/model) too, so the planner refuses what the engine refuses.
 */
import { mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { indexSafetensors, readModelConfig } from "../../src/engine/model/index.js";
import { loadVector } from "../../src/engine/model/tensors.js";
import { engineOf, type EngineKind } from "../../src/engines/index.js";
import { isShardctlError, type ShardctlError } from "../../src/errors/index.js";
import { checkModelFormat, inspectModel, makeTestModel, planCluster, type ClusterPlan, type ModelProfile, type TestModelOptions } from "../../src/planner/index.js";
import { parseCluster, parseSettings, type ClusterSpec } from "../../src/spec/index.js";
import { layoutHeader, llamaLayer, tempDir, writeConfig, writeRawSafetensors } from "./fixtures.js";

const settingsText = [
  '[nodes.a]\nhost = "10.0.0.1"\nmodel_dir = "/models"\nmemory = "4GiB"',
  '[nodes.b]\nhost = "10.0.0.2"\nmodel_dir = "/models"\nmemory = "4GiB"',
  // A coordinator's node only.
  '[nodes.c]\nhost = "10.0.0.3"\nmodel_dir = "/models"\nmemory = "4GiB"',
].join("\n");

/** The plan of a two-node cluster serving the model in `dir` with `engine`, as `shardctl plan` and the daemon make it. */
async function planFor(dir: string, engine: EngineKind): Promise<ClusterPlan> {
  const settings = parseSettings(settingsText, join(dir, "..", "shardctl.toml"));
  if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
  const cluster = parseCluster(
    `nodes = ["a", "b"]\n[model]\nid = ${JSON.stringify(dir)}\nsource = "push"\ncontext_length = 256\n[engine]\nkind = "${engine}"\n`,
    join(dir, "..", "clusters", "x.toml"),
    settings.value,
  );
  if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
  return planCluster(cluster.value, settings.value);
}

async function planRefusal(dir: string, engine: EngineKind): Promise<ShardctlError> {
  const error = await planFor(dir, engine).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isShardctlError(error)) throw new Error(`expected a ShardctlError, got ${String(error)}`);
  return error;
}

/** A test model (2 layers, two shards with an index unless asked otherwise), then `edit` applied to its config.json. */
async function model(edit: (config: Record<string, unknown>) => void = () => undefined, options: TestModelOptions = {}): Promise<string> {
  const dir = join(await tempDir(), "model");
  await makeTestModel(dir, { layers: 2, shards: 2, ...options });
  const config = JSON.parse(await readFile(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  edit(config);
  await writeConfig(dir, config);
  return dir;
}

/** Rewrite the index so that `shard` is named `named`, and move the file to match. */
async function renameShard(dir: string, shard: string, named: string): Promise<void> {
  const file = join(dir, "model.safetensors.index.json");
  const index = JSON.parse(await readFile(file, "utf8")) as { weight_map: Record<string, string> };
  for (const [tensor, path] of Object.entries(index.weight_map)) if (path === shard) index.weight_map[tensor] = named;
  await writeFile(file, JSON.stringify(index));
  await mkdir(join(dir, named, ".."), { recursive: true });
  await rename(join(dir, shard), join(dir, named));
}

const reasons = (plan: ClusterPlan): string[] => plan.plan.errors.map((e) => e.reason);

describe("a shard named by a path, which no engine loads", () => {
  it.each([
    ["a subdirectory", "sub/model-00002-of-00002.safetensors"],
    ["'./'", "./model-00002-of-00002.safetensors"],
  ])("%s: ModelIndexInvalid naming the index, the entry and the bare name to write, for every engine", async (_, named) => {
    const dir = await model();
    await renameShard(dir, "model-00002-of-00002.safetensors", named);
    for (const engine of ["reference", "mlxcel", "mlx-lm"] as const) {
      const error = await planRefusal(dir, engine);
      expect(error.reason).toBe("ModelIndexInvalid");
      expect(error.terminal).toBe(true);
      expect(error.message).toMatch(
        new RegExp(
          `^${escape(join(dir, "model.safetensors.index.json"))}: weight_map\\["[^"]+"\\] = "${escape(named)}" is a path, not a file name: ` +
            `the engines load the safetensors files beside config\\.json only; put the file there and write its bare name, "model-00002-of-00002\\.safetensors", in the weight_map$`,
        ),
      );
    }
    // shard-engine refuses the same index.
    expect(() => indexSafetensors(dir)).toThrow(/names ".*model-00002-of-00002\.safetensors", not a file of the model directory/);
  });
});

describe("max_position_embeddings that is not a positive integer, which no engine serves", () => {
  it.each([-5, 0, 1.5, "4096"])("%s: ModelConfigInvalid naming config.json and the field, for every engine", async (value) => {
    const dir = await model((config) => void (config.max_position_embeddings = value));
    for (const engine of ["reference", "mlxcel", "mlx-lm"] as const) {
      const error = await planRefusal(dir, engine);
      expect(error.reason).toBe("ModelConfigInvalid");
      expect(error.message).toBe(
        `${join(dir, "config.json")}: max_position_embeddings must be a positive integer (the most tokens a sequence may hold), got ${JSON.stringify(value)}: ` +
          "no engine serves that context; restore the value of the model's published config.json",
      );
    }
  });

  it("null is unset, as in other configs", async () => {
    const dir = await model((config) => void (config.max_position_embeddings = null));
    expect((await planFor(dir, "reference")).plan.feasible).toBe(true);
  });
});

describe("numbers no engine computes with: a norm's epsilon, RoPE's base and scaling, tie_word_embeddings' type", () => {
  it.each<[string, (config: Record<string, unknown>) => void, string]>([
    ["rms_norm_eps = -1", (c) => void (c.rms_norm_eps = -1), "rms_norm_eps must be a positive number, got -1"],
    ["rope_theta = 0", (c) => void (c.rope_theta = 0), "rope_theta must be a positive number, got 0"],
    [
      "rope_scaling.factor = -1",
      (c) => void (c.rope_scaling = { rope_type: "llama3", factor: -1, low_freq_factor: 1, high_freq_factor: 4, original_max_position_embeddings: 8192 }),
      "rope_scaling.factor must be a positive number, got -1",
    ],
  ])("%s: ModelConfigInvalid for every engine, and shard-engine's loader refuses it too", async (_, edit, words) => {
    const dir = await model(edit);
    for (const engine of ["reference", "mlxcel", "mlx-lm"] as const) {
      const error = await planRefusal(dir, engine);
      expect(error.reason).toBe("ModelConfigInvalid");
      expect(error.message).toBe(`${join(dir, "config.json")}: ${words}: no engine computes with it; restore the value of the model's published config.json`);
    }
    expect(() => readModelConfig(dir)).toThrow(new RegExp(words.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")));
  });

  it('tie_word_embeddings = "yes": ModelConfigInvalid, it is true or false', async () => {
    const dir = await model((c) => void (c.tie_word_embeddings = "yes"));
    expect((await planRefusal(dir, "reference")).message).toBe(`${join(dir, "config.json")}: tie_word_embeddings must be true or false, got "yes"`);
  });
});

describe("what shard-engine's loader cannot read: a plan error for the reference engine only", () => {
  it("F8_E4M3 weights: ModelUnsupportedByEngine naming the file, the tensor and what to do", async () => {
    const dir = join(await tempDir(), "model");
    await mkdir(dir);
    await writeConfig(dir, {
      model_type: "llama",
      num_hidden_layers: 2,
      hidden_size: 8,
      num_attention_heads: 2,
      num_key_value_heads: 1,
      intermediate_size: 8,
      vocab_size: 16,
      torch_dtype: "float8_e4m3fn",
    });
    const tensors = [
      ["model.embed_tokens.weight", "F8_E4M3", [16, 8]],
      ...llamaLayer(0).map(([name, , shape]) => [name, "F8_E4M3", shape]),
      ...llamaLayer(1).map(([name, , shape]) => [name, "F8_E4M3", shape]),
      ["model.norm.weight", "F8_E4M3", [8]],
      ["lm_head.weight", "F8_E4M3", [16, 8]],
    ] as Parameters<typeof layoutHeader>[0];
    const { header, dataBytes } = layoutHeader(tensors);
    await writeRawSafetensors(join(dir, "model.safetensors"), header, dataBytes);
    await writeFile(join(dir, "tokenizer.json"), "{}");

    const plan = await planFor(dir, "reference");
    expect(plan.plan.feasible).toBe(false);
    expect(plan.plan.errors).toEqual([
      {
        reason: "ModelUnsupportedByEngine",
        message:
          `${dir}/model.safetensors: tensor "model.embed_tokens.weight" is F8_E4M3, and shard-engine loads F32, F16, BF16 tensors only (and MLX-quantized weights): ` +
          "convert the model to one of them (mlx_lm.convert --dtype bfloat16, with -q to quantize), or use another engine",
      },
    ]);
    expect(reasons(await planFor(dir, "mlxcel"))).not.toContain("ModelUnsupportedByEngine");
    // shard-engine refuses it at load.
    expect(() => loadVector(indexSafetensors(dir).get("model.norm.weight")!)).toThrow("unsupported dtype F8_E4M3");
  });

  it("config.json without intermediate_size: ModelUnsupportedByEngine naming config.json, the field and what to do", async () => {
    const dir = await model((config) => void delete config.intermediate_size);
    const plan = await planFor(dir, "reference");
    expect(plan.plan.errors).toEqual([
      {
        reason: "ModelUnsupportedByEngine",
        message: `${dir}/config.json: intermediate_size is missing, and shard-engine requires it: add it as the model's published config.json gives it`,
      },
    ]);
    expect((await planFor(dir, "mlxcel")).plan.feasible).toBe(true);
    expect(() => readModelConfig(dir)).toThrow("expected `intermediate_size` to be a positive integer, got undefined");
  });

  it("a rope_scaling other than Llama 3's: ModelUnsupportedByEngine naming its type", async () => {
    const dir = await model((config) => void (config.rope_scaling = { type: "linear", factor: 2 }));
    expect((await planFor(dir, "reference")).plan.errors).toEqual([
      {
        reason: "ModelUnsupportedByEngine",
        message: `${dir}/config.json: rope_scaling is of type "linear", and shard-engine implements llama3 only: use another engine for this model`,
      },
    ]);
    expect((await planFor(dir, "mlxcel")).plan.feasible).toBe(true);
    expect(() => readModelConfig(dir)).toThrow('rope_scaling type "linear" is not supported');
  });

  it.each<[string, TestModelOptions]>([
    ["f16", { dtype: "f16" }],
    ["bf16, one file", { dtype: "bf16", shards: 1 }],
    ["f32", { dtype: "f32" }],
    ["4-bit", { quantize: 4, dtype: "bf16" }],
    ["8-bit, tied", { quantize: 8, tieWordEmbeddings: true }],
    ["Llama 3.1 rope_scaling", { llama3RopeScaling: true }],
  ])("a model it loads (%s) plans without one", async (_, options) => {
    const dir = await model(undefined, options);
    const plan = await planFor(dir, "reference");
    expect(plan.plan.errors).toEqual([]);
    // The packed U32 weights of a quantized model are no dtype of their own.
    expect(plan.profile.dtypes.map((d) => d.dtype)).toEqual([{ f16: "F16", bf16: "BF16", f32: "F32" }[options.dtype ?? "f16"]]);
  });
});

describe("checkModelFormat against the reference engine's facts", () => {
  const reference = engineOf("reference");

  async function profileOf(options: TestModelOptions, edit: (profile: ModelProfile) => void): Promise<ModelProfile> {
    const profile = await inspectModel({ kind: "dir", path: await model(undefined, options) });
    edit(profile);
    return profile;
  }
  const messages = (profile: ModelProfile): string[] => checkModelFormat(profile, reference).map((m) => m.message);

  it("quantization its kernels do not unpack: the bits, a group size, another mode, a module's own group size", async () => {
    const profile = await profileOf({ quantize: 4 }, (p) => {
      p.config.quantization = {
        bits: 6,
        groupSize: 64,
        mode: "mxfp4",
        overrides: { "model.layers.0.mlp.down_proj": { bits: 4, groupSize: 16 }, "model.layers.1.mlp.down_proj": { bits: 8, groupSize: 32 }, lm_head: false },
      };
    });
    const config = `${profile.source}/config.json`;
    expect(messages(profile)).toEqual([
      `${config}: quantization.mode is "mxfp4", and shard-engine loads 4-bit and 8-bit affine quantization only: quantize the model in that mode, or use another engine`,
      `${config}: quantization.bits = 6, and shard-engine loads 4-bit and 8-bit affine quantization only: quantize the model to 4 or 8 bits, or use another engine`,
      `${config}: quantization["model.layers.0.mlp.down_proj"].group_size = 16 at 4 bits, and shard-engine needs a multiple of 32 there: ` +
        "quantize the model with a larger group size (64 is MLX's default), or use another engine",
      `${config}: quantization["model.layers.1.mlp.down_proj"].group_size = 32, and shard-engine reads every module with the default group size (64): ` +
        "quantize the model with one group size, or use another engine",
    ]);
    expect(checkModelFormat(profile, engineOf("mlxcel"))).toEqual([]);
  });

  it("a multimodal checkpoint: its text_config and language_model.* tensors", async () => {
    const nested = await profileOf({}, (p) => void (p.config.textConfig = true));
    expect(messages(nested)).toEqual([
      `${nested.source}/config.json: a multimodal checkpoint that keeps the language model's fields under text_config; ` +
        "shard-engine reads config.json's top level and tensors named model.* only: serve the model's text-only version, or use another engine",
    ]);
    const prefixed = await profileOf({}, (p) => void (p.tensorPrefix = "language_model."));
    expect(messages(prefixed)[0]).toContain("a multimodal checkpoint that names its tensors language_model.model.*");
  });

  it("a rope_scaling that names no type", async () => {
    const profile = await profileOf({}, (p) => void (p.config.ropeScalingType = ""));
    expect(messages(profile)).toEqual([
      `${profile.source}/config.json: rope_scaling names no type, and shard-engine implements llama3 only: use another engine for this model`,
    ]);
  });
});

function escape(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

describe("a model without a tokenizer", () => {
  it("is a plan error for every engine, naming the files; a SentencePiece tokenizer.model is one", async () => {
    const dir = await model();
    await rm(join(dir, "tokenizer.json"));
    for (const engine of ["reference", "mlxcel", "mlx-lm"] as const) {
      const plan = await planFor(dir, engine);
      expect(plan.plan.errors.find((e) => e.reason === "ModelTokenizerMissing")?.message).toBe(
        `${dir} has no tokenizer (neither tokenizer.json nor tokenizer.model beside config.json), so no engine can turn a prompt into tokens: copy the model's tokenizer files (tokenizer.json, tokenizer_config.json) from where it came from`,
      );
    }
    await writeFile(join(dir, "tokenizer.model"), "sentencepiece");
    expect(reasons(await planFor(dir, "mlx-lm"))).not.toContain("ModelTokenizerMissing");
  });
});

describe("[engine] version against the version a node's engine reports", () => {
  it("EngineVersionMismatch names the node and quotes what it reported, terminal sequences escaped", async () => {
    const dir = await model();
    const settings = parseSettings(settingsText, join(dir, "..", "shardctl.toml"));
    if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
    const cluster = parseCluster(
      `nodes = ["a", "b"]\n[model]\nid = ${JSON.stringify(dir)}\nsource = "push"\ncontext_length = 256\n[engine]\nkind = "reference"\nversion = "0.1.0"\n`,
      join(dir, "..", "clusters", "x.toml"),
      settings.value,
    );
    if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
    const plan = await planCluster(cluster.value, settings.value, { a: { engineVersion: "shard-engine 0.1.0" }, b: { engineVersion: "\u001b]0;pwned\u0007 0.0.9" } });
    expect(reasons(plan)).toEqual(["MixedEngineVersions", "EngineVersionMismatch"]);
    expect(plan.plan.errors[0]!.message).toBe(
      "nodes run different engine versions (shard-engine 0.1.0 on a; \\u001b]0;pwned\\u0007 0.0.9 on b); a cluster must run one version",
    );
    expect(plan.plan.errors[1]!.message).toBe(
      '[engine] version = "0.1.0" but b reports "\\u001b]0;pwned\\u0007 0.0.9": install "0.1.0" there or change the expected version',
    );
  });

  it("the coordinator's node, when only it runs there, must run the stages' version: MixedEngineVersions names it, and [engine] version holds for it too", async () => {
    const dir = await model();
    const settings = parseSettings(settingsText, join(dir, "..", "shardctl.toml"));
    if (!settings.ok) throw new Error(JSON.stringify(settings.issues));
    const definition = (extra: string): ClusterSpec => {
      const cluster = parseCluster(
        `nodes = ["a", "b"]\n[model]\nid = ${JSON.stringify(dir)}\nsource = "push"\ncontext_length = 256\n[coordinator]\nnode = "c"\n[engine]\nkind = "reference"\n${extra}`,
        join(dir, "..", "clusters", "x.toml"),
        settings.value,
      );
      if (!cluster.ok) throw new Error(JSON.stringify(cluster.issues));
      return cluster.value;
    };
    const stages = { a: { engineVersion: "shard-engine 0.1.0" }, b: { engineVersion: "shard-engine 0.1.0" } };
    const mixed = await planCluster(definition(""), settings.value, { ...stages, c: { engineVersion: "shard-engine 0.2.0" } });
    expect(reasons(mixed)).toEqual(["MixedEngineVersions"]);
    expect(mixed.plan.errors[0]!.message).toBe(
      "nodes run different engine versions (shard-engine 0.1.0 on a, b; shard-engine 0.2.0 on c (the coordinator's)); a cluster must run one version",
    );
    expect(reasons(await planCluster(definition(""), settings.value, { ...stages, c: { engineVersion: "shard-engine 0.1.0" } }))).toEqual([]);
    // Expected 0.1.0 everywhere: the coordinator's node is named with the rest.
    const expected = await planCluster(definition('version = "0.1.0"\n'), settings.value, { ...stages, c: { engineVersion: "shard-engine 0.2.0" } });
    expect(expected.plan.errors.find((e) => e.reason === "EngineVersionMismatch")?.message).toBe(
      '[engine] version = "0.1.0" but c reports "shard-engine 0.2.0": install "0.1.0" there or change the expected version',
    );
  });
});
