/**
 * Profiles with chosen per-layer sizes, built the real way (a synthetic safetensors header parsed
 * by the planner's parser), for plan tests that need unequal layers or 405B-class sizes.
 */
import { buildModelProfile, parseModelConfig, parseSafetensorsHeader, type ModelProfile } from "../../src/planner/index.js";

export interface SyntheticModel {
  layerBytes: number[];
  embeddingBytes?: number;
  normBytes?: number;
  /** 0 means tied embeddings. */
  lmHeadBytes?: number;
  config?: Record<string, unknown>;
  /** Whether model.safetensors.index.json maps the tensors (as a sharded model's does). Default true. */
  indexed?: boolean;
  /** Bytes of a tensor outside the language model (a vision projector), in a file of its own, extra.safetensors. Default none. */
  otherBytes?: number;
}

export function syntheticProfile(model: SyntheticModel): ModelProfile {
  const header: Record<string, unknown> = {};
  let offset = 0;
  const add = (name: string, bytes: number): void => {
    if (bytes <= 0) return;
    header[name] = { dtype: "U8", shape: [bytes], data_offsets: [offset, offset + bytes] };
    offset += bytes;
  };
  add("model.embed_tokens.weight", model.embeddingBytes ?? 1000);
  model.layerBytes.forEach((bytes, i) => add(`model.layers.${i}.mlp.weight`, bytes));
  add("model.norm.weight", model.normBytes ?? 10);
  add("lm_head.weight", model.lmHeadBytes ?? 1000);
  const bytes = Buffer.from(JSON.stringify(header));
  const parsed = parseSafetensorsHeader(bytes, "synthetic.safetensors", 8 + bytes.length + offset);
  const config = parseModelConfig({
    model_type: "llama",
    num_hidden_layers: model.layerBytes.length,
    hidden_size: 64,
    num_attention_heads: 4,
    num_key_value_heads: 2,
    vocab_size: 100,
    torch_dtype: "float16",
    tie_word_embeddings: model.lmHeadBytes === 0,
    ...model.config,
  });
  const files = [{ path: "model.safetensors", header: parsed }];
  const weightMap: Record<string, string> = Object.fromEntries(Object.keys(header).map((name) => [name, "model.safetensors"]));
  if (model.otherBytes !== undefined) {
    const extra = Buffer.from(JSON.stringify({ "multi_modal_projector.weight": { dtype: "U8", shape: [model.otherBytes], data_offsets: [0, model.otherBytes] } }));
    files.push({ path: "extra.safetensors", header: parseSafetensorsHeader(extra, "extra.safetensors", 8 + extra.length + model.otherBytes) });
    weightMap["multi_modal_projector.weight"] = "extra.safetensors";
  }
  return buildModelProfile("synthetic", config, files, model.indexed === false ? undefined : new Map(Object.entries(weightMap)));
}
