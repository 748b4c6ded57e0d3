/**
 * Names a model chooses (a tensor's dtype, its name, config.json's torch_dtype, the keys of the
 * index's weight_map and of config.json's quantization) that are also the names of
 * Object.prototype's members: each must be looked up as the model's own string, never find
 * "constructor", "toString" or the prototype itself. An unknown dtype is the same
 * SafetensorsHeaderInvalid as any other, naming the file and the tensor.
 */
import { writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isShardctlError, type ShardctlError } from "../../src/errors/index.js";
import { inspectModel, planShards, renderPlanText, type ModelProfile } from "../../src/planner/index.js";
import { layoutHeader, llamaConfig, llamaLayer, tempDir, writeConfig, writeRawSafetensors } from "./fixtures.js";

/** The names Object.prototype answers to. */
const inherited = ["__proto__", "constructor", "toString", "hasOwnProperty", "valueOf"];

type Tensor = Parameters<typeof layoutHeader>[0][number];

/** The tensors of `llamaConfig()` (2 layers), every one in `dtype`. */
function llamaTensors(dtype: Tensor[1] = "F16"): Tensor[] {
  return [
    ["model.embed_tokens.weight", dtype, [16, 8]],
    ...llamaLayer(0).map(([name, , shape]): Tensor => [name, dtype, shape]),
    ...llamaLayer(1).map(([name, , shape]): Tensor => [name, dtype, shape]),
    ["model.norm.weight", dtype, [8]],
    ["lm_head.weight", dtype, [16, 8]],
  ];
}

/** A model directory: config.json and one model.safetensors of `header`, optionally with an index. */
async function writeModel(config: Record<string, unknown>, header: Record<string, unknown>, dataBytes: number, weightMap?: Record<string, string>): Promise<string> {
  const dir = await tempDir();
  await writeConfig(dir, config);
  await writeRawSafetensors(join(dir, "model.safetensors"), header, dataBytes);
  if (weightMap !== undefined) await writeFile(join(dir, "model.safetensors.index.json"), JSON.stringify({ weight_map: weightMap }));
  return dir;
}

async function inspect(dir: string): Promise<ModelProfile> {
  return inspectModel({ kind: "dir", path: dir });
}

async function refusal(dir: string): Promise<ShardctlError> {
  const error = await inspect(dir).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isShardctlError(error)) throw new Error(`expected a ShardctlError, got ${String(error)}`);
  return error;
}

describe("a tensor dtype named like an Object.prototype member", () => {
  it.each(inherited)("%s: SafetensorsHeaderInvalid naming the file and the tensor, as any unknown dtype", async (dtype) => {
    const { header, dataBytes } = layoutHeader(llamaTensors());
    (header["model.norm.weight"] as { dtype: string }).dtype = dtype;
    const dir = await writeModel(llamaConfig(), header, dataBytes);
    const error = await refusal(dir);
    expect(error.reason).toBe("SafetensorsHeaderInvalid");
    expect(error.terminal).toBe(true);
    expect(error.message).toContain(
      `${join(dir, "model.safetensors")}: tensor "model.norm.weight" has dtype ${JSON.stringify(dtype)}, which is not a safetensors dtype (BOOL, F4,`,
    );
  });
});

describe("config.json's torch_dtype named like an Object.prototype member", () => {
  it.each(inherited)("%s, with weights of no float dtype: the plan's dtype stays a dtype name", async (torchDtype) => {
    const { header, dataBytes } = layoutHeader(llamaTensors("F8_E4M3"));
    const profile = await inspect(await writeModel(llamaConfig({ torch_dtype: torchDtype }), header, dataBytes));
    // Neither the weights (F8) nor torch_dtype name a float dtype: the default.
    expect(profile.dtype).toBe("F16");
    expect(profile.kvBytesPerElement).toBe(2);
    const plan = planShards(
      profile,
      [
        { name: "a", memoryBytes: 2 ** 30 },
        { name: "b", memoryBytes: 2 ** 30 },
      ],
      { strategy: "equal", engine: "mlxcel", contextLength: 64 },
    );
    expect(renderPlanText(plan).split("\n")[0]).toMatch(/: llama, 2 layers, F16; engine mlxcel/);
  });
});

describe("a layer module named like an Object.prototype member", () => {
  it.each(inherited.filter((name) => name !== "__proto__").map((name) => [name]))(
    "model.layers.0.%s.inv_freq is refused as model.layers.0.foo.inv_freq is",
    async (module) => {
      const tensors: Tensor[] = [...llamaTensors(), ["model.layers.0.foo.inv_freq", "F16", [2]]];
      const foo = await refusal(await writeModel(llamaConfig(), layoutHeader(tensors).header, layoutHeader(tensors).dataBytes));
      expect(foo.reason).toBe("ModelTensorUnexpected");
      const named: Tensor[] = [...llamaTensors(), [`model.layers.0.${module}.inv_freq`, "F16", [2]]];
      const error = await refusal(await writeModel(llamaConfig(), layoutHeader(named).header, layoutHeader(named).dataBytes));
      expect(error.reason).toBe("ModelTensorUnexpected");
      expect(error.message).toContain(`model.safetensors: tensor "model.layers.0.${module}.inv_freq" is not a tensor of the llama layout`);
    },
  );

  it("model.layers.0.__proto__.weight is refused as well", async () => {
    const named: Tensor[] = [...llamaTensors(), ["model.layers.0.__proto__.weight", "F16", [8]]];
    const error = await refusal(await writeModel(llamaConfig(), layoutHeader(named).header, layoutHeader(named).dataBytes));
    expect(error.reason).toBe("ModelTensorUnexpected");
    expect(error.message).toContain(`tensor "model.layers.0.__proto__.weight"`);
  });
});

describe("the index's weight_map keyed by tensor names like Object.prototype members", () => {
  const mapOf = (names: string[]): Record<string, string> => Object.fromEntries(names.map((name) => [name, "model.safetensors"]));

  it.each(inherited)("a tensor %s that the weight_map lists is read like any other tensor outside the language model", async (name) => {
    const tensors: Tensor[] = [...llamaTensors(), [name, "F16", [4]]];
    const { header, dataBytes } = layoutHeader(tensors);
    const profile = await inspect(await writeModel(llamaConfig(), header, dataBytes, mapOf(tensors.map(([n]) => n))));
    expect(profile.otherBytes).toBe(8);
    expect(profile.files[0]!.tensors).toContain(name);
  });

  it.each(inherited)("a tensor %s that the weight_map does not list: ModelIndexInvalid saying the weight_map names nothing", async (name) => {
    const tensors: Tensor[] = [...llamaTensors(), [name, "F16", [4]]];
    const { header, dataBytes } = layoutHeader(tensors);
    const error = await refusal(await writeModel(llamaConfig(), header, dataBytes, mapOf(llamaTensors().map(([n]) => n))));
    expect(error.reason).toBe("ModelIndexInvalid");
    expect(error.message).toBe(`model.safetensors.index.json: tensor ${JSON.stringify(name)} is in model.safetensors but the weight_map says nothing`);
  });
});

describe("config.json's quantization keyed by module paths like Object.prototype members", () => {
  it('a "__proto__" entry stays an entry: the overrides keep Object.prototype as their prototype', async () => {
    const { header, dataBytes } = layoutHeader(llamaTensors());
    const quantization = JSON.parse('{"bits": 4, "group_size": 64, "__proto__": {"bits": 8, "group_size": 32}, "constructor": false}') as unknown;
    const profile = await inspect(await writeModel(llamaConfig({ quantization }), header, dataBytes));
    const overrides = profile.config.quantization!.overrides;
    expect(Object.getPrototypeOf(overrides)).toBe(Object.prototype);
    expect(Object.keys(overrides).sort()).toEqual(["__proto__", "constructor"]);
    expect(Object.getOwnPropertyDescriptor(overrides, "__proto__")?.value).toEqual({ bits: 8, groupSize: 32 });
  });
});
