/**
 * A repository whose safetensors headers are far larger than any real model's (each under the
 * format's 100 MB, many of them, or millions of zero-length tensors) is refused as
 * SafetensorsHeaderInvalid, terminal, before the planner reads past the model's cap of 64 MiB of
 * headers or parses more than 1,000,000 entries: such a model cost the daemon gigabytes and a
 * plan pass long enough to miss its own network deadlines. The files are real, built lazily: a
 * header that is never read is a sparse file.
 */
import { open, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { isShardctlError, type ShardctlError } from "../../src/errors/index.js";
import { countHeaderEntries, inspectModel } from "../../src/planner/index.js";
import { llamaConfig, tempDir, writeConfig } from "./fixtures.js";

const MiB = 1024 * 1024;

async function refusal(dir: string): Promise<ShardctlError> {
  const error = await inspectModel({ kind: "dir", path: dir }).then(
    () => undefined,
    (e: unknown) => e,
  );
  if (!isShardctlError(error)) throw new Error(`expected a ShardctlError, got ${String(error)}`);
  return error;
}

/** A safetensors file of `header` (JSON text) and no data. */
async function writeHeader(file: string, header: string): Promise<void> {
  const json = Buffer.from(header, "utf8");
  const prefix = Buffer.alloc(8);
  prefix.writeBigUInt64LE(BigInt(json.length));
  await writeFile(file, Buffer.concat([prefix, json]));
}

/** A model directory of config.json, `files` safetensors files and an index mapping tensor "t<i>" to file i. */
async function shardedModel(files: number, header: (i: number) => string): Promise<string> {
  const dir = await tempDir();
  await writeConfig(dir, llamaConfig());
  const weightMap: Record<string, string> = {};
  for (let i = 0; i < files; i++) {
    const name = `model-${String(i).padStart(5, "0")}.safetensors`;
    weightMap[`t${i}`] = name;
    await writeHeader(join(dir, name), header(i));
  }
  await writeFile(join(dir, "model.safetensors.index.json"), JSON.stringify({ weight_map: weightMap }));
  return dir;
}

describe("a model's safetensors headers past their caps", () => {
  it("one header of 65 MiB (under the format's 100 MB): refused from its length, never read", async () => {
    const dir = await tempDir();
    await writeConfig(dir, llamaConfig());
    // 8 bytes of length, then 65 MiB of zeros the file system does not store: not JSON, so a reader
    // that read and parsed it would say so instead.
    const length = 65 * MiB;
    const handle = await open(join(dir, "model.safetensors"), "w");
    const prefix = Buffer.alloc(8);
    prefix.writeBigUInt64LE(BigInt(length));
    await handle.write(prefix, 0, 8, 0);
    await handle.truncate(8 + length);
    await handle.close();
    const error = await refusal(dir);
    expect(error.reason).toBe("SafetensorsHeaderInvalid");
    expect(error.terminal).toBe(true);
    expect(error.message).toBe(
      `${dir}/model.safetensors: the 68157440-byte header of this file brings the model's headers to 68157440 bytes (65.0 MiB), ` +
        "over the cap of 64.0 MiB for all of a model's safetensors files together; no real model's headers are this large " +
        "(a 405B model's total a few MB and some thousand tensors): the repository is damaged or hostile, and nothing more of it is read — " +
        "check where the model comes from and use a sound copy",
    );
  });

  it("12 shards of 5.5 MiB headers each, 66 MiB together: refused at the shard that passes 64 MiB", async () => {
    // Each header is a sound one: a zero-length tensor and 5.5 MiB of metadata.
    const pad = "x".repeat(5.5 * MiB);
    const dir = await shardedModel(12, (i) => JSON.stringify({ __metadata__: { pad }, [`t${i}`]: { dtype: "U8", shape: [0], data_offsets: [0, 0] } }));
    const error = await refusal(dir);
    expect(error.reason).toBe("SafetensorsHeaderInvalid");
    expect(error.terminal).toBe(true);
    expect(error.message).toMatch(
      new RegExp(
        `^${dir}/model-000\\d\\d\\.safetensors: the \\d+-byte header of this file brings the model's headers to (6[7-9]|7\\d)\\d{6} bytes \\(6[4-9]\\.\\d MiB\\), over the cap of 64\\.0 MiB`,
      ),
    );
    expect(error.message).toContain("no real model's headers are this large");
  });

  /** The JSON entries of `count` zero-length tensors, the first named "t<shard>" (the one the index maps). */
  const zeroLengthTensors = (shard: number, count: number): string => {
    const parts = [`"t${shard}":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`];
    for (let j = 1; j < count; j++) parts.push(`"${shard}.${j.toString(36)}":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}`);
    return parts.join(",");
  };

  it("two shards of 500,001 zero-length tensors each (27 MB of header apiece): refused past 1,000,000 entries for the model", async () => {
    const dir = await shardedModel(2, (i) => `{${zeroLengthTensors(i, 500_001)}}`);
    const error = await refusal(dir);
    expect(error.reason).toBe("SafetensorsHeaderInvalid");
    expect(error.terminal).toBe(true);
    expect(error.message).toMatch(
      new RegExp(
        `^${dir}/model-0000[01]\\.safetensors: this file's header brings the model's headers to 1000002 entries \\(tensors and metadata\\), over the cap of 1000000 for a model; no real model's headers are this large`,
      ),
    );
  });

  it("entries are counted before the header is parsed: 1,000,001 of them followed by what is not JSON are refused for their count", async () => {
    const dir = await shardedModel(1, (i) => `{${zeroLengthTensors(i, 1_000_001)}} not JSON`);
    const error = await refusal(dir);
    expect(error.reason).toBe("SafetensorsHeaderInvalid");
    expect(error.message).toContain(`${dir}/model-00000.safetensors: this file's header brings the model's headers to 1000001 entries`);
  });
});

describe("countHeaderEntries", () => {
  it.each([
    ["{}", 0],
    ['{"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]}}', 1],
    ['{"__metadata__":{"k":"v","l":"w"},"a":{"shape":[1,2]}}', 2],
    // Quotes, braces, brackets and colons inside names and values, escaped quotes and backslashes, non-ASCII.
    ['{"a:{\\"}[":{"x":"}:]{\\\\"},"b\\\\":[{"y":":"}],"é:ü":"\\u003a"}', 3],
  ])("%s: %i, as many keys as JSON.parse finds", (json, count) => {
    expect(countHeaderEntries(Buffer.from(json, "utf8"))).toBe(count);
    expect(Object.keys(JSON.parse(json) as object)).toHaveLength(count);
  });
});
