/** `shardctl make-test-model <dir> [options]`: write a deterministic Llama- or Qwen2-family MLX model. */
import { readdir } from "node:fs/promises";
import { parseArgs } from "node:util";
import { makeTestModel, type FloatDtype, type TestModelOptions } from "../../planner/index.js";
import { usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";

const usage = usageOf("make-test-model");

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: {
      family: { type: "string" },
      layers: { type: "string" },
      hidden: { type: "string" },
      heads: { type: "string" },
      "kv-heads": { type: "string" },
      intermediate: { type: "string" },
      vocab: { type: "string" },
      dtype: { type: "string" },
      quantize: { type: "string" },
      shards: { type: "string" },
      seed: { type: "string" },
      tie: { type: "boolean" },
      force: { type: "boolean" },
    },
  });
  const [dir] = positionals;
  if (dir === undefined || positionals.length > 1) throw new UsageError(`expected one output directory\n${usage}`);
  const int = (flag: string, value: string | undefined): number | undefined => {
    if (value === undefined) return undefined;
    if (!/^\d+$/.test(value)) throw new UsageError(`expected --${flag} to be a positive integer, got "${value}"`);
    return Number(value);
  };
  const dtype = values.dtype ?? "f16";
  if (!["f16", "bf16", "f32"].includes(dtype)) throw new UsageError(`expected --dtype to be f16, bf16 or f32, got "${dtype}"`);
  const family = values.family ?? "llama";
  if (family !== "llama" && family !== "qwen2") throw new UsageError(`expected --family to be llama or qwen2, got "${family}"`);
  const quantize = int("quantize", values.quantize);
  if (quantize !== undefined && quantize !== 4 && quantize !== 8) throw new UsageError(`expected --quantize to be 4 or 8, got "${quantize}"`);
  if (values.force !== true) await refuseExistingModel(dir);
  try {
    const model = await makeTestModel(dir, {
      family: family satisfies TestModelOptions["family"],
      layers: int("layers", values.layers),
      hidden: int("hidden", values.hidden),
      heads: int("heads", values.heads),
      kvHeads: int("kv-heads", values["kv-heads"]),
      intermediate: int("intermediate", values.intermediate),
      vocab: int("vocab", values.vocab),
      dtype: dtype as FloatDtype,
      quantize,
      shards: int("shards", values.shards),
      seed: int("seed", values.seed),
      tieWordEmbeddings: values.tie ?? false,
    });
    console.log(`wrote ${model.files.length} files (${model.totalBytes} bytes of weights) to ${dir}`);
    return 0;
  } catch (error) {
    if (error instanceof RangeError) throw new UsageError(error.message);
    throw error;
  }
}

/** The files of a model in a directory: what writing a test model there deletes or overwrites. */
const isModelFile = (name: string): boolean => name === "config.json" || name === "model.safetensors.index.json" || name.endsWith(".safetensors");

/**
 * Refuse a directory that already holds a model: writing a test model deletes every safetensors file
 * there, so a real model's path given by mistake (a variable set for the real cluster) would lose its
 * weights to random ones. An empty or missing directory, or one with other files only, is fine.
 */
async function refuseExistingModel(dir: string): Promise<void> {
  const names = await readdir(dir).catch((error: NodeJS.ErrnoException) => {
    if (error.code === "ENOENT") return [];
    throw error;
  });
  const found = names.filter(isModelFile).sort();
  if (found.length === 0) return;
  const shown = found.length > 3 ? `${found.slice(0, 3).join(", ")} and ${found.length - 3} more` : found.join(", ");
  throw new UsageError(
    `${dir} already holds a model (${shown}): make-test-model would replace its weights with random ones; give it an empty directory, or pass --force to replace that model`,
  );
}
