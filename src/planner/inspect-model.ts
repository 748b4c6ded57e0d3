import { quoteText, ShardctlError } from "../errors/index.js";
import { checkModelTensors } from "./check-tensors.js";
import { createDirReader } from "./dir-source.js";
import { createHubReader } from "./hub-source.js";
import { formatBytes } from "./format-bytes.js";
import { maxConfigBytes, maxIndexBytes, maxModelHeaderBytes, maxModelTensors, maxSafetensorsFiles } from "./model-bounds.js";
import { parseModelConfig } from "./model-config.js";
import { buildModelProfile, type HeaderFile, type ModelProfile } from "./model-profile.js";
import type { ModelSource, SourceReader } from "./model-source.js";
import { countHeaderEntries, parseSafetensorsHeader } from "./safetensors-header.js";

const indexFile = "model.safetensors.index.json";
const singleFile = "model.safetensors";

/**
 * Inspect an MLX-format model without reading its weights: config.json, the index when sharded,
 * and each safetensors header. Over HTTP that is one request for config.json, one for the index
 * (a 404 when the model is a single file) and two Range requests per safetensors file.
 */
export async function inspectModel(source: ModelSource): Promise<ModelProfile> {
  const reader = source.kind === "dir" ? createDirReader(source.path) : createHubReader(source);
  return inspectWithReader(reader);
}

/** Inspection over any reader (exported for callers with their own transport). */
export async function inspectWithReader(reader: SourceReader): Promise<ModelProfile> {
  const where = reader.describe();
  // Read config.json.
  const rawConfig = await reader.readJson("config.json", maxConfigBytes);
  if (rawConfig === undefined) {
    throw new ShardctlError("ModelConfigMissing", `${where}: config.json not found — not an MLX-format model`, { terminal: true });
  }
  const config = parseModelConfig(rawConfig, `${where}/config.json`);

  // Find the safetensors files: the index's weight_map, else the single model.safetensors.
  const rawIndex = await reader.readJson(indexFile, maxIndexBytes);
  let weightMap: Map<string, string> | undefined;
  let paths: string[];
  if (rawIndex !== undefined) {
    weightMap = readWeightMap(rawIndex, `${where}/${indexFile}`);
    paths = [...new Set(weightMap.values())].sort();
    if (paths.length > maxSafetensorsFiles) {
      throw new ShardctlError("ModelIndexInvalid", `${where}/${indexFile}: names ${paths.length} safetensors files; at most ${maxSafetensorsFiles} are read`, {
        terminal: true,
      });
    }
  } else {
    paths = [singleFile];
  }

  // Read every header, a few at a time: over HTTP each costs two round trips, and a 405B model
  // has ~190 files — all at once would open that many connections to the Hub. What the headers
  // read so far hold is held against the model's caps (model-bounds.ts): a header past them is
  // refused before it is read (bytes) or parsed (entries), so a repository of oversized headers
  // costs the planner 64 MiB of reading at most, not its memory and its event loop.
  let headerBytes = 0;
  let entries = 0;
  const headers = await mapLimit(paths, headerConcurrency, async (path): Promise<HeaderFile> => {
    const file = `${where}/${path}`;
    const raw = await reader.readHeader(path, (length) => {
      headerBytes += length;
      if (headerBytes > maxModelHeaderBytes) {
        const figure = `the ${length}-byte header of this file brings the model's headers to ${headerBytes} bytes (${formatBytes(headerBytes)})`;
        throw headersTooLarge(file, `${figure}, over the cap of ${formatBytes(maxModelHeaderBytes)} for all of a model's safetensors files together`);
      }
    });
    if (raw === undefined) throw await explainMissing(reader, path, rawIndex !== undefined);
    entries += countHeaderEntries(raw.bytes);
    if (entries > maxModelTensors) {
      throw headersTooLarge(
        file,
        `this file's header brings the model's headers to ${entries} entries (tensors and metadata), over the cap of ${maxModelTensors} for a model`,
      );
    }
    return { path, header: parseSafetensorsHeader(raw.bytes, file, raw.fileSize), fileSize: raw.fileSize };
  });
  const profile = buildModelProfile(where, config, headers, weightMap);
  // The weights must be the model config.json describes: names, shapes, quantized packing.
  checkModelTensors(profile, headers);
  const tokenizer = reader.listsCheaply === true ? await tokenizerOf(reader) : undefined;
  return tokenizer === undefined ? profile : { ...profile, tokenizer };
}

/** Files of which one is a tokenizer every engine reads. */
const tokenizerFiles = ["tokenizer.json", "tokenizer.model"];

/** Whether the model's files hold a tokenizer; undefined when they cannot be listed. */
async function tokenizerOf(reader: SourceReader): Promise<"present" | "missing" | undefined> {
  const files = await reader.listFiles();
  if (files === undefined) return undefined;
  return files.some((f) => tokenizerFiles.includes(f)) ? "present" : "missing";
}

/**
 * A model's headers past its caps: terminal, as any other header that is not a sound one, and said
 * so (the plan pass fails here, not later on a deadline the parsing made it miss).
 */
function headersTooLarge(file: string, figure: string): ShardctlError {
  return new ShardctlError(
    "SafetensorsHeaderInvalid",
    `${file}: ${figure}; no real model's headers are this large (a 405B model's total a few MB and some thousand tensors): ` +
      "the repository is damaged or hostile, and nothing more of it is read — check where the model comes from and use a sound copy",
    { terminal: true },
  );
}

/** Header reads in flight at once. */
const headerConcurrency = 8;

/**
 * `items.map(fn)` with at most `limit` calls pending; results keep the input order. Once a call
 * fails no new one starts (those in flight finish): the rest would be read only to be dropped.
 */
async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  let failed = false;
  const worker = async (): Promise<void> => {
    while (next < items.length && !failed) {
      const i = next++;
      try {
        results[i] = await fn(items[i]!);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(limit, items.length) }, worker));
  return results;
}

/**
 * model.safetensors.index.json's weight_map, tensor → file. A Map: tensor names are the model's, and
 * "__proto__" or "constructor" must be keys like any other, not Object.prototype's members.
 */
function readWeightMap(raw: unknown, file: string): Map<string, string> {
  const map = (raw as { weight_map?: unknown } | null)?.weight_map;
  if (typeof map !== "object" || map === null || Array.isArray(map)) {
    throw new ShardctlError("ModelIndexInvalid", `${file}: weight_map is missing or not an object`, { terminal: true });
  }
  const out = new Map<string, string>();
  // Each file name is judged once: the map names a few files for thousands of tensors, and the
  // daemon plans on its event loop (a hostile 60 MB index once held it 10 s, quoting every entry).
  const judged = new Set<string>();
  for (const [tensor, path] of Object.entries(map as Record<string, unknown>)) {
    if (typeof path === "string" && judged.has(path)) {
      out.set(tensor, path);
      continue;
    }
    const where = `weight_map[${quoteText(tensor)}] = ${quoteText(path)}`;
    if (typeof path !== "string" || !/^[\w.-]+(?:\/[\w.-]+)*\.safetensors$/.test(path) || path.split("/").includes("..")) {
      throw new ShardctlError("ModelIndexInvalid", `${file}: ${where} is not a safetensors file name`, { terminal: true });
    }
    // The engines load shards from the model directory itself: shard-engine refuses a name with a
    // '/', and mlx-lm loads the model*.safetensors beside config.json only. A shard named by a path
    // ("sub/x", even "./x") would be planned and staged, then fail every launch.
    if (path.includes("/")) {
      throw new ShardctlError(
        "ModelIndexInvalid",
        `${file}: ${where} is a path, not a file name: the engines load the safetensors files beside config.json only; ` +
          `put the file there and write its bare name, ${quoteText(path.slice(path.lastIndexOf("/") + 1))}, in the weight_map`,
        { terminal: true },
      );
    }
    judged.add(path);
    out.set(tensor, path);
  }
  if (out.size === 0) throw new ShardctlError("ModelIndexInvalid", `${file}: weight_map is empty`, { terminal: true });
  return out;
}

async function explainMissing(reader: SourceReader, path: string, indexed: boolean): Promise<ShardctlError> {
  const where = reader.describe();
  if (indexed) {
    return new ShardctlError("ModelIndexInvalid", `${where}/${indexFile}: refers to ${path}, which does not exist`, { terminal: true });
  }
  const files = (await reader.listFiles()) ?? [];
  const foreign = files.filter((f) => /\.(bin|gguf|pt|pth|ckpt|safetensors)$/.test(f));
  const found = foreign.length > 0 ? `; found ${foreign.slice(0, 5).map(quoteText).join(", ")}${foreign.length > 5 ? ", …" : ""}` : "";
  return new ShardctlError("ModelNotMlx", `${where}: neither ${singleFile} nor ${indexFile} exists — not an MLX-format model (config.json + safetensors)${found}`, {
    terminal: true,
  });
}
