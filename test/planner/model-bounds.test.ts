/**
 * Hostile and inconsistent models: config.json counts far past any real model, tensors of a dtype
 * safetensors does not have, shapes that disagree with config.json, mixture-of-experts tensors in a
 * model declared llama, and model files that are FIFOs or too large. Inspection (and so `plan`)
 * refuses each with a reason and a message naming the file and the tensor — quickly, and before
 * anything is allocated from the bad count.
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, truncate, writeFile } from "node:fs/promises";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { execa } from "execa";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { isShardctlError } from "../../src/errors/index.js";
import { configBounds, inspectModel, makeTestModel, parseSafetensorsHeader, type ModelProfile } from "../../src/planner/index.js";
import { startHubServer, type HubServer } from "../support/hub-server.js";
import { allocateHost } from "../support/test-world.js";
import { layoutHeader, llamaConfig, llamaLayer, tempDir, writeConfig, writeRawSafetensors } from "./fixtures.js";

const cli = fileURLToPath(new URL("../../dist/src/cli/shardctl.js", import.meta.url));

/** What inspecting `dir` throws (failing when it succeeds or takes over `deadlineMs`). */
async function refusal(dir: string, deadlineMs = 3000): Promise<Error & { reason: string; terminal: boolean }> {
  const started = Date.now();
  let timer: NodeJS.Timeout | undefined;
  const hung = new Promise<never>((_, fail) => (timer = setTimeout(() => fail(new Error(`inspection still running after ${deadlineMs} ms`)), deadlineMs)));
  try {
    const error = await Promise.race([inspectModel({ kind: "dir", path: dir }).then(() => new Error("expected a refusal, inspection succeeded")), hung]).catch(
      (e: unknown) => e,
    );
    expect(isShardctlError(error), String(error)).toBe(true);
    expect(Date.now() - started).toBeLessThan(deadlineMs);
    return error as Error & { reason: string; terminal: boolean };
  } finally {
    clearTimeout(timer);
  }
}

/** A test model in a fresh directory, then config.json changed by `edit`. */
async function modelWithConfig(edit: (config: Record<string, unknown>) => void, options: Parameters<typeof makeTestModel>[1] = { layers: 2 }): Promise<string> {
  const dir = await tempDir();
  await makeTestModel(dir, options);
  const config = JSON.parse(await readFile(join(dir, "config.json"), "utf8")) as Record<string, unknown>;
  edit(config);
  await writeConfig(dir, config);
  return dir;
}

describe("config.json counts are bounded before anything is allocated from them", () => {
  const cases: Array<[key: string, value: unknown, bound: number]> = [
    ["num_hidden_layers", 1e12, configBounds.layers],
    ["num_hidden_layers", 100_000_000, configBounds.layers],
    ["hidden_size", 1e9, configBounds.hiddenSize],
    ["num_attention_heads", 1e6, configBounds.heads],
    ["num_key_value_heads", 2048, configBounds.heads],
    ["head_dim", 1e7, configBounds.headDim],
    ["vocab_size", 1e10, configBounds.vocabSize],
    ["intermediate_size", 1e9, configBounds.intermediateSize],
    ["sliding_window", 1e12, configBounds.slidingWindow],
  ];
  for (const [key, value, bound] of cases) {
    it(`${key} = ${value}: ModelConfigInvalid naming the bound ${bound}`, async () => {
      const dir = await modelWithConfig((config) => void (config[key] = value));
      const error = await refusal(dir);
      expect(error.reason).toBe("ModelConfigInvalid");
      expect(error.terminal).toBe(true);
      expect(error.message).toContain(`config.json: ${key} = ${value} is above the bound of ${bound}`);
    });
  }

  it("num_attention_heads not a multiple of num_key_value_heads", async () => {
    const error = await refusal(await modelWithConfig((config) => void (config.num_key_value_heads = 3)));
    expect(error.reason).toBe("ModelConfigInvalid");
    expect(error.message).toContain("num_attention_heads (4) is not a multiple of num_key_value_heads (3)");
  });

  it("layer_types with another length than num_hidden_layers", async () => {
    const dir = await modelWithConfig((config) => Object.assign(config, { sliding_window: 128, layer_types: Array.from({ length: 1000 }, () => "sliding_attention") }));
    expect((await refusal(dir)).message).toContain("layer_types has 1000 entries but num_hidden_layers is 2");
  });

  it("an architectures list of 100 entries", async () => {
    const dir = await modelWithConfig((config) => void (config.architectures = Array.from({ length: 100 }, () => "LlamaForCausalLM")));
    expect((await refusal(dir)).message).toContain(`architectures lists 100 entries; at most ${configBounds.architectures}`);
  });

  it("quantization bits and group sizes MLX does not have", async () => {
    const bits = await refusal(await modelWithConfig((config) => void (config.quantization = { group_size: 64, bits: 7 })));
    expect(bits.message).toContain("quantization.bits = 7; MLX quantizes to 2, 3, 4, 5, 6, 8 bits");
    const group = await refusal(await modelWithConfig((config) => void (config.quantization = { group_size: 48, bits: 4 })));
    expect(group.message).toContain("quantization.group_size = 48");
  });
});

describe("tensor dtypes come from the safetensors set", () => {
  it("a tensor of dtype Q4_K (a GGUF type): SafetensorsHeaderInvalid naming it and the set", async () => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    const header = { "model.embed_tokens.weight": { dtype: "Q4_K", shape: [16, 8], data_offsets: [0, 64] } };
    await writeRawSafetensors(join(dir, "model.safetensors"), header, 64);
    const error = await refusal(dir);
    expect(error.reason).toBe("SafetensorsHeaderInvalid");
    expect(error.message).toContain(`tensor "model.embed_tokens.weight" has dtype "Q4_K", which is not a safetensors dtype (BOOL, F4, F6_E2M3`);
  });

  it("sub-byte dtypes count their bits: F4 [4] is 2 bytes, F6_E2M3 [4] is 3 bytes; F4 [3] is no whole byte count", () => {
    const parse = (header: object, dataBytes: number): unknown => {
      const bytes = Buffer.from(JSON.stringify(header));
      return parseSafetensorsHeader(bytes, "x.safetensors", 8 + bytes.length + dataBytes);
    };
    expect(() => parse({ a: { dtype: "F4", shape: [4], data_offsets: [0, 2] }, b: { dtype: "F6_E2M3", shape: [4], data_offsets: [2, 5] } }, 5)).not.toThrow();
    expect(() => parse({ a: { dtype: "F4", shape: [3], data_offsets: [0, 2] } }, 2)).toThrow(/F4 shape \[3\] needs 12 bits, not a whole number of bytes/);
  });
});

describe("tensor shapes agree with config.json", () => {
  it("num_key_value_heads changed: k_proj disagrees (ModelTensorShapeMismatch naming the tensor and the fields)", async () => {
    const error = await refusal(await modelWithConfig((config) => void (config.num_key_value_heads = 4)));
    expect(error.reason).toBe("ModelTensorShapeMismatch");
    expect(error.message).toContain(
      `model.safetensors: tensor "model.layers.0.self_attn.k_proj.weight" is F16 [32, 64] but config.json (num_key_value_heads 4 × head_dim 16, hidden_size 64) gives [64, 64]`,
    );
  });

  it("vocab_size changed: the embedding disagrees", async () => {
    const error = await refusal(await modelWithConfig((config) => void (config.vocab_size = 321)));
    expect(error.message).toContain(`tensor "model.embed_tokens.weight" is F16 [320, 64] but config.json (vocab_size 321 × hidden_size 64) gives [321, 64]`);
  });

  it("intermediate_size changed: the MLP disagrees", async () => {
    const error = await refusal(await modelWithConfig((config) => void (config.intermediate_size = 192)));
    expect(error.message).toContain(`tensor "model.layers.0.mlp.gate_proj.weight" is F16 [128, 64] but config.json (intermediate_size 192`);
  });

  it("a 4-bit model declared 8-bit: the packed weight disagrees", async () => {
    const dir = await modelWithConfig((config) => void (config.quantization = { group_size: 64, bits: 8 }), { layers: 2, quantize: 4 });
    const error = await refusal(dir);
    expect(error.reason).toBe("ModelTensorShapeMismatch");
    expect(error.message).toContain(
      `tensor "model.embed_tokens.weight" is U32 [320, 8] but config.json (vocab_size 320 × hidden_size 64, 8 bits) gives [320, 16] (8-bit packed into uint32)`,
    );
  });

  it("a group size of 32 declared for groups of 64: the scales disagree", async () => {
    const dir = await modelWithConfig((config) => void (config.quantization = { group_size: 32, bits: 4 }), { layers: 2, quantize: 4 });
    expect((await refusal(dir)).message).toContain(
      `tensor "model.embed_tokens.scales" is F16 [320, 1] but config.json (vocab_size 320 × hidden_size 64, group_size 32) gives [320, 2]`,
    );
  });

  it("quantized weights with no quantization in config.json", async () => {
    const dir = await modelWithConfig((config) => void delete config.quantization, { layers: 2, quantize: 4 });
    expect((await refusal(dir)).message).toContain("model.embed_tokens is MLX-quantized (it has scales) but config.json has no quantization");
  });

  it("per-module quantization entries are honoured: every module declared 4-bit under an 8-bit default passes", async () => {
    const modules = ["model.embed_tokens", "lm_head"];
    for (let layer = 0; layer < 2; layer++) {
      for (const m of ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]) {
        modules.push(`model.layers.${layer}.${m}`);
      }
    }
    const dir = await modelWithConfig(
      (config) => void (config.quantization = { group_size: 64, bits: 8, ...Object.fromEntries(modules.map((m) => [m, { group_size: 64, bits: 4 }])) }),
      { layers: 2, quantize: 4 },
    );
    const profile: ModelProfile = await inspectModel({ kind: "dir", path: dir });
    expect(profile.config.quantization?.overrides["model.layers.1.mlp.down_proj"]).toEqual({ groupSize: 64, bits: 4 });
    // One module left at the 8-bit default: refused, naming it.
    const config = JSON.parse(await readFile(join(dir, "config.json"), "utf8")) as { quantization: Record<string, unknown> };
    delete config.quantization["model.layers.1.mlp.down_proj"];
    await writeConfig(dir, config as unknown as Record<string, unknown>);
    expect((await refusal(dir)).message).toContain(`tensor "model.layers.1.mlp.down_proj.weight" is U32 [64, 16]`);
  });

  it("the generated test models pass, float and quantized, tied and sharded", async () => {
    for (const options of [{ layers: 3 }, { layers: 2, quantize: 4 as const, shards: 2 }, { layers: 2, quantize: 8 as const, tieWordEmbeddings: true }]) {
      const dir = await tempDir();
      await makeTestModel(dir, options);
      await expect(inspectModel({ kind: "dir", path: dir })).resolves.toMatchObject({ family: "llama" });
    }
  });
});

describe("tensor names are the declared family's", () => {
  async function llamaWith(extra: Array<[string, "F16", number[]]>, config = llamaConfig(), drop?: string): Promise<string> {
    const dir = await tempDir();
    await writeConfig(dir, config);
    const tensors: Array<[string, "F16", number[]]> = [
      ["model.embed_tokens.weight", "F16", [16, 8]],
      ...llamaLayer(0),
      ...llamaLayer(1),
      ["model.norm.weight", "F16", [8]],
      ["lm_head.weight", "F16", [16, 8]],
      ...extra,
    ];
    const { header, dataBytes } = layoutHeader(tensors.filter(([name]) => name !== drop));
    await writeRawSafetensors(join(dir, "model.safetensors"), header, dataBytes);
    return dir;
  }

  it("the hand-made complete llama passes (the fixture the failures below alter)", async () => {
    await expect(inspectModel({ kind: "dir", path: await llamaWith([]) })).resolves.toMatchObject({ layers: 2 });
  });

  for (const name of [
    "model.layers.0.block_sparse_moe.experts.0.w1.weight",
    "model.layers.1.mlp.experts.3.gate_proj.weight",
    "model.layers.0.mlp.switch_mlp.up_proj.weight",
  ]) {
    it(`MoE expert tensor ${name} in a model declared llama: ModelTensorUnexpected`, async () => {
      const error = await refusal(await llamaWith([[name, "F16", [8, 8]]]));
      expect(error.reason).toBe("ModelTensorUnexpected");
      expect(error.message).toContain(`model.safetensors: tensor "${name}" is a mixture-of-experts tensor, but config.json declares model_type "llama", a dense model`);
    });
  }

  it("the same tensors under model_type mixtral are not judged by the llama layout", async () => {
    const dir = await llamaWith([["model.layers.0.block_sparse_moe.experts.0.w1.weight", "F16", [8, 8]]], llamaConfig({ model_type: "mixtral" }));
    await expect(inspectModel({ kind: "dir", path: dir })).resolves.toMatchObject({ family: "mixtral" });
  });

  it("a fused qkv_proj (another family's layout) in a llama: ModelTensorUnexpected", async () => {
    const error = await refusal(await llamaWith([["model.layers.0.self_attn.qkv_proj.weight", "F16", [16, 8]]]));
    expect(error.message).toContain(`tensor "model.layers.0.self_attn.qkv_proj.weight" is not a tensor of the llama layout`);
  });

  it("a layer without o_proj: ModelTensorMissing", async () => {
    const error = await refusal(await llamaWith([], llamaConfig(), "model.layers.1.self_attn.o_proj.weight"));
    expect(error.reason).toBe("ModelTensorMissing");
    expect(error.message).toContain("no tensor model.layers.1.self_attn.o_proj.weight, which every llama model has");
  });

  it("no lm_head while tie_word_embeddings is false: ModelTensorMissing", async () => {
    const error = await refusal(await llamaWith([], llamaConfig(), "lm_head.weight"));
    expect(error.message).toContain("no tensor lm_head.weight");
  });
});

describe("model files that are not files to read", () => {
  function mkfifo(path: string): void {
    execFileSync("mkfifo", [path]);
  }

  it("config.json is a FIFO: NotRegularFile at once", async () => {
    const dir = await tempDir();
    mkfifo(join(dir, "config.json"));
    const error = await refusal(dir);
    expect(error.reason).toBe("NotRegularFile");
    expect(error.message).toBe(
      `${dir}/config.json: the config.json is a FIFO (named pipe), not a regular file; only regular files are read — replace it with the file itself`,
    );
  });

  it("model.safetensors is a FIFO: NotRegularFile at once", async () => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    mkfifo(join(dir, "model.safetensors"));
    const error = await refusal(dir);
    expect(error.reason).toBe("NotRegularFile");
    expect(error.message).toContain(`${dir}/model.safetensors: the safetensors file is a FIFO`);
  });

  it("model.safetensors.index.json is a FIFO: NotRegularFile at once", async () => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    mkfifo(join(dir, "model.safetensors.index.json"));
    expect((await refusal(dir)).message).toContain("model.safetensors.index.json is a FIFO");
  });

  it("config.json over the 4 MiB cap: FileTooLarge, unread", async () => {
    const dir = await modelWithConfig((config) => void (config.padding = "x".repeat(4 * 1024 * 1024)));
    const error = await refusal(dir);
    expect(error.reason).toBe("FileTooLarge");
    expect(error.message).toMatch(/config\.json: the config\.json is \d+ bytes, over the cap of 4194304 bytes \(4 MiB\)/);
  });

  it("an index over the 64 MiB cap (a sparse file: refused from its size alone)", async () => {
    const dir = await tempDir();
    await makeTestModel(dir, { layers: 2, shards: 2 });
    await truncate(join(dir, "model.safetensors.index.json"), 64 * 1024 * 1024 + 1);
    expect((await refusal(dir)).message).toContain("over the cap of 67108864 bytes (64 MiB)");
  });
});

describe("over HTTP: a config.json past the cap is never buffered whole", () => {
  let hub: HubServer;
  let chunked: Server;
  let host: string;
  const commit = "0123456789abcdef0123456789abcdef01234567";

  beforeAll(async () => {
    host = await allocateHost();
    const big = await modelWithConfig((config) => void (config.padding = "x".repeat(5 * 1024 * 1024)));
    hub = await startHubServer({ host, repos: [{ repo: "test-org/big-config", commit, dir: big }] });
    // No Content-Length: the body arrives chunked, 64 KiB at a time, for as long as it is read.
    chunked = createServer((req, res) => {
      res.writeHead(200, { "content-type": "application/json" });
      const piece = Buffer.alloc(64 * 1024, 0x20);
      let sent = 0;
      const pump = (): void => {
        while (sent < 64 * 1024 * 1024 && res.write(piece)) sent += piece.length;
        if (sent < 64 * 1024 * 1024) res.once("drain", pump);
        else res.end();
      };
      res.on("close", () => res.removeAllListeners("drain"));
      pump();
    });
    await new Promise<void>((done) => chunked.listen(0, host, done));
  });
  afterAll(async () => {
    await hub?.close();
    chunked?.closeAllConnections();
    await new Promise<void>((done) => chunked?.close(() => done()));
  });

  it("a declared length over the cap: FileTooLarge before the body is read", async () => {
    const error = await inspectModel({ kind: "hub", endpoint: hub.endpoint, repo: "test-org/big-config", revision: "main" }).catch((e: unknown) => e);
    expect(isShardctlError(error, "FileTooLarge"), String(error)).toBe(true);
    expect((error as Error).message).toContain("config.json is 52");
    expect((error as Error).message).toContain("over the cap of 4194304 bytes (4 MiB)");
  });

  it("a chunked body: read to one byte past the cap, then refused", async () => {
    const endpoint = `http://${host}:${(chunked.address() as AddressInfo).port}`;
    const error = await inspectModel({ kind: "hub", endpoint, repo: "test-org/endless", revision: "main" }).catch((e: unknown) => e);
    expect(isShardctlError(error, "FileTooLarge"), String(error)).toBe(true);
    expect((error as Error).message).toContain("config.json is more than 4194304 bytes");
  });
});

describe("plan and stage answer at once (the built CLI, with a deadline)", () => {
  let root: string;
  let modelDir: string;

  beforeAll(async () => {
    if (!existsSync(cli)) throw new Error(`${cli} is missing: run \`npm run build\` first`);
    root = await mkdtemp(join(tmpdir(), "shardctl-model-bounds-"));
    modelDir = join(root, "model");
    await makeTestModel(modelDir, { layers: 4, shards: 2 });
    const nodes = ["l1", "l2"].flatMap((name) => [
      `[nodes.${name}]`,
      'host = "local"',
      `model_dir = ${JSON.stringify(join(root, "nodes", name))}`,
      'memory = "4GiB"',
      'accelerator = "cpu"',
      "",
    ]);
    await writeFile(join(root, "shardctl.toml"), [`[daemon]`, `state_dir = ${JSON.stringify(join(root, "state"))}`, "", ...nodes].join("\n"));
    await writeFile(
      join(root, "pushed.toml"),
      [
        'nodes = ["l1", "l2"]',
        "",
        "[model]",
        `id = ${JSON.stringify(modelDir)}`,
        'source = "push"',
        "context_length = 256",
        "",
        "[engine]",
        'kind = "reference"',
        "",
      ].join("\n"),
    );
  });
  afterAll(async () => {
    if (root) await rm(root, { recursive: true, force: true });
  });

  const shardctl = (...args: string[]) =>
    execa(process.execPath, [cli, ...args, "--config", join(root, "shardctl.toml")], { cwd: root, reject: false, timeout: 20_000, env: { NO_COLOR: "1" } });

  it("the definition plans while its files are regular (the baseline the next two alter)", async () => {
    const run = await shardctl("plan", "pushed.toml");
    expect(run.exitCode, run.stderr + run.stdout).toBe(0);
  });

  it("shardctl plan: a weights shard that is a FIFO → exit 1 naming it, at once", async () => {
    const shard = join(modelDir, "model-00002-of-00002.safetensors");
    const saved = await readFile(shard);
    await rm(shard);
    mkfifoAt(shard);
    try {
      const run = await shardctl("plan", "pushed.toml");
      expect(run.timedOut).toBe(false);
      expect(run.exitCode).toBe(1);
      expect(run.stdout + run.stderr).toContain(`NotRegularFile: ${shard}: the safetensors file is a FIFO (named pipe)`);
    } finally {
      await rm(shard);
      await writeFile(shard, saved);
    }
  });

  it("shardctl stage: a push source whose tokenizer.json is a FIFO → exit 1 naming it, nothing staged", async () => {
    const tokenizer = join(modelDir, "tokenizer.json");
    const saved = await readFile(tokenizer);
    await rm(tokenizer);
    mkfifoAt(tokenizer);
    try {
      const run = await shardctl("stage", "pushed.toml");
      expect(run.timedOut).toBe(false);
      expect(run.exitCode).toBe(1);
      expect(run.stderr).toContain(`the push source ${modelDir}: tokenizer.json is a FIFO (named pipe), not a regular file`);
      expect(existsSync(join(root, "nodes", "l1"))).toBe(false);
    } finally {
      await rm(tokenizer);
      await writeFile(tokenizer, saved);
    }
  });

  function mkfifoAt(path: string): void {
    execFileSync("mkfifo", [path]);
  }
});
