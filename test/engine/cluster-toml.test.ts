/** The engine's cluster TOML: mlxcel's format, validation errors naming the file, and the default split. */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { computeStageRanges, readClusterConfig, validateCluster, type ClusterConfig } from "../../src/engine/config/index.js";

let dir: string;
beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "engine-toml-"));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

const example = `
[cluster]
name = "remote-pp"
tensor_parallel_size = 1
pipeline_parallel_size = 2
transport_backend = "tcp"
[[nodes]]
id = "coordinator"
address = "10.0.0.1:39600"
role = "hybrid"
[[nodes]]
id = "stage-1"
address = "10.0.0.3:39602"
role = "pipeline_stage"
stage = 1
[[nodes]]
id = "stage-0"
address = "10.0.0.2:39601"
role = "pipeline_stage"
stage = 0
[nodes.resources]
memory_bytes = 1000
`;

function nodes(count: number, extra: (i: number) => Record<string, unknown> = () => ({})): Record<string, unknown> {
  return {
    cluster: { pipeline_parallel_size: count },
    nodes: [
      { id: "c", address: "127.0.0.1:1000", role: "hybrid" },
      ...Array.from({ length: count }, (_, i) => ({ id: `s${i}`, address: `127.0.0.1:${2000 + i}`, role: "pipeline_stage", stage: i, ...extra(i) })),
    ],
  };
}

describe("cluster TOML", () => {
  it("reads mlxcel's example, stages ordered by index", async () => {
    const file = join(dir, "c.toml");
    await writeFile(file, example);
    const c = readClusterConfig(file);
    expect(c.name).toBe("remote-pp");
    expect(c.coordinator).toMatchObject({ id: "coordinator", host: "10.0.0.1", port: 39600 });
    expect(c.stages.map((s) => s.id)).toEqual(["stage-0", "stage-1"]);
  });

  it("refuses bad files with the file name in the message", async () => {
    const file = join(dir, "bad.toml");
    await writeFile(file, "[cluster\n");
    expect(() => readClusterConfig(file)).toThrow(new RegExp(`^${file}: invalid TOML`));
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ ...nodes(2), cluster: { pipeline_parallel_size: 3 } }, /pipeline_parallel_size is 3 but 2/],
      [nodes(2, (i) => ({ stage: i + 1 })), /stage indices must be exactly 0..1/],
      [nodes(2, () => ({ address: "127.0.0.1:5" })), /address 127.0.0.1:5 is used twice/],
      [nodes(2, () => ({ id: "same" })), /node id "same" is used twice/],
      [nodes(2, () => ({ address: "host.example:5" })), /is not IP:port/],
      // Every address is dialed by a peer: a wildcard names no machine.
      [
        {
          ...nodes(1),
          nodes: [
            { id: "c", address: "0.0.0.0:1000", role: "hybrid" },
            { id: "s0", address: "127.0.0.1:2000", role: "pipeline_stage", stage: 0 },
          ],
        },
        /"c"\): address "0.0.0.0:1000" is a wildcard/,
      ],
      [nodes(1, () => ({ address: "[::]:2000" })), /"s0"\): address "\[::\]:2000" is a wildcard/],
      [{ cluster: { pipeline_parallel_size: 1 }, nodes: [{ id: "s", address: "127.0.0.1:1", role: "pipeline_stage", stage: 0 }] }, /exactly one node with role "hybrid"/],
      [nodes(2, (i) => (i === 0 ? { layers: [0, 2] } : {})), /every stage node or on none/],
      [nodes(2, (i) => ({ layers: i === 0 ? [0, 2] : [3, 4] })), /layers start at 3, expected 2/],
      [nodes(2, () => ({ layers: [2, 2] })), /layers must be \[start, end\]/],
    ];
    for (const [raw, message] of cases) {
      expect(() => validateCluster("x.toml", raw)).toThrow(message);
      expect(() => validateCluster("x.toml", raw)).toThrow(/^x\.toml: /);
    }
  });

  it("splits like mlxcel by default: ceil(L/N) per stage, the rest on the last", () => {
    const split = (layers: number, stages: number): number[] => computeStageRanges(validateCluster("x.toml", nodes(stages)), layers).map(([a, b]) => b - a);
    expect(split(16, 2)).toEqual([8, 8]);
    expect(split(27, 2)).toEqual([14, 13]);
    expect(split(32, 3)).toEqual([11, 11, 10]);
    expect(split(10, 4)).toEqual([3, 3, 3, 1]);
    expect(split(30, 4)).toEqual([8, 8, 8, 6]);
    expect(() => split(4, 3)).toThrow(/leaves stage 2 empty/);
  });

  it("uses explicit ranges, which must cover the model", () => {
    const c: ClusterConfig = validateCluster(
      "x.toml",
      nodes(2, (i) => ({ layers: i === 0 ? [0, 1] : [1, 6] })),
    );
    expect(computeStageRanges(c, 6)).toEqual([
      [0, 1],
      [1, 6],
    ]);
    expect(() => computeStageRanges(c, 8)).toThrow(/end at 6, but the model has 8 layers/);
  });
});
