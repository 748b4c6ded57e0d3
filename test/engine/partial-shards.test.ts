/**
 * A stage loads from a node that holds only the safetensors shards its layers need (as staging
 * places them): the other shards' headers are never opened.
 */
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/index.js";
import { ModelShard, readModelConfig } from "../../src/engine/model/index.js";

const dirs: string[] = [];
afterAll(async () => {
  for (const dir of dirs) await rm(dir, { recursive: true, force: true });
});

it("loads the first layers with only the shard that holds them, and names the missing shard for the others", async () => {
  const dir = await mkdtemp(join(tmpdir(), "shardctl-partial-shards-"));
  dirs.push(dir);
  await makeTestModel(dir, { layers: 4, shards: 2, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, seed: 3 });
  const index = JSON.parse(await readFile(join(dir, "model.safetensors.index.json"), "utf8")) as { weight_map: Record<string, string> };
  // The test model puts the first layers and the embedding in the first shard; remove the second.
  expect(index.weight_map["model.layers.0.self_attn.q_proj.weight"]).toBe("model-00001-of-00002.safetensors");
  expect(index.weight_map["model.layers.3.self_attn.q_proj.weight"]).toBe("model-00002-of-00002.safetensors");
  await rm(join(dir, "model-00002-of-00002.safetensors"));
  const config = readModelConfig(dir);
  expect(ModelShard.load(dir, config, { start: 0, end: 2 }).range).toEqual({ start: 0, end: 2 });
  expect(() => ModelShard.load(dir, config, { start: 2, end: 4 })).toThrow(/model-00002-of-00002\.safetensors/);
});
