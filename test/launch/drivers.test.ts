import { readFile, writeFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { parse } from "smol-toml";
import { describe, expect, it } from "vitest";
import { bundledShardEngine, createDriver, shardEngineNodeFlags, type EngineTopology, type ProcessFiles } from "../../src/engines/index.js";

// mlxcel cannot run here, so the TOML and argv it is given are pinned by golden files.
// Regenerate deliberately with UPDATE_GOLDEN=1 after checking the diff against what mlxcel-server
// accepts: the cluster TOML's [cluster] and [[nodes]] keys and the flags of its command line.
async function expectGolden(name: string, actual: string): Promise<void> {
  const file = fileURLToPath(new URL(`./golden/${name}`, import.meta.url));
  if (process.env.UPDATE_GOLDEN === "1") await writeFile(file, actual);
  expect(actual).toBe(await readFile(file, "utf8"));
}

const topology: EngineTopology = {
  cluster: "llama-70b",
  modelName: "mlx-community/Llama-3.3-70B-Instruct-4bit",
  maxSequences: 1,
  transport: "tcp",
  coordinator: { id: "coordinator", address: { host: "10.0.0.1", port: 39600 }, http: { host: "10.0.0.1", port: 8080 } },
  stages: [
    { index: 0, id: "stage-0", address: { host: "10.0.0.2", port: 39601 }, layers: [0, 40] },
    { index: 1, id: "stage-1", address: { host: "10.0.0.3", port: 39602 }, layers: [40, 80] },
  ],
  explicitLayers: false,
};
const files: ProcessFiles = {
  modelDir: "/Users/admin/models/models--mlx-community--Llama-3.3-70B-Instruct-4bit/snapshots/abc",
  clusterConfig: "/Users/admin/models/.shardctl/run/llama-70b/cluster.toml",
  tokenFile: "/Users/admin/models/.shardctl/run/llama-70b/transport.token",
  cacheDir: "/Users/admin/models/.shardctl/run/llama-70b/cache",
};

describe("mlxcel driver", () => {
  const driver = createDriver("mlxcel", { extraArgs: ["--max-kv-size", "8192"] });

  it("writes the cluster TOML mlxcel documents", async () => {
    const toml = driver.renderClusterConfig(topology);
    await expectGolden("mlxcel-cluster.toml", toml);
    const parsed = parse(toml) as { cluster: Record<string, unknown>; nodes: Array<Record<string, unknown>> };
    expect(parsed.cluster.pipeline_parallel_size).toBe(2);
    expect(parsed.nodes.filter((n) => n.role === "pipeline_stage").map((n) => n.stage)).toEqual([0, 1]);
    expect(parsed.nodes.some((n) => "layers" in n)).toBe(false);
  });

  it("starts stages and the coordinator with the documented flags", async () => {
    const argv = {
      stage1: driver.stageArgv(topology, topology.stages[1]!, files),
      coordinator: driver.coordinatorArgv(topology, files),
    };
    await expectGolden("mlxcel-argv.json", JSON.stringify(argv, null, 2) + "\n");
    expect(argv.stage1).toContain("--no-warmup");
    expect(argv.coordinator).not.toContain("--no-warmup");
    expect(argv.coordinator).not.toContain("--transport-token-file");
  });

  it("uses [engine] binary when given", () => {
    const custom = createDriver("mlxcel", { binary: "/opt/mlxcel/bin/mlxcel-server", extraArgs: [] });
    expect(custom.versionArgv()).toEqual(["/opt/mlxcel/bin/mlxcel-server", "--version"]);
  });
});

describe("reference driver", () => {
  it("runs this installation's shard-engine with a token and explicit layers", () => {
    const driver = createDriver("reference", { extraArgs: [] });
    const toml = parse(driver.renderClusterConfig({ ...topology, explicitLayers: true })) as { nodes: Array<Record<string, unknown>> };
    expect(toml.nodes.filter((n) => n.role === "pipeline_stage").map((n) => n.layers)).toEqual([
      [0, 40],
      [40, 80],
    ]);
    const argv = driver.stageArgv(topology, topology.stages[0]!, files);
    expect(argv.slice(0, 2 + shardEngineNodeFlags.length)).toEqual([process.execPath, ...shardEngineNodeFlags, bundledShardEngine]);
    expect(argv.slice(argv.indexOf("--transport-token-file"), argv.indexOf("--transport-token-file") + 2)).toEqual(["--transport-token-file", files.tokenFile]);
    expect(bundledShardEngine).toMatch(/dist\/src\/cli\/shard-engine\.js$|src\/cli\/shard-engine\.js$/);
  });

  it("tells the coordinator the definition's context_length (what the KV caches were planned for), and the stages nothing of it", () => {
    const driver = createDriver("reference", { extraArgs: [] });
    const coordinator = driver.coordinatorArgv({ ...topology, contextLength: 4096 }, files);
    expect(coordinator.slice(coordinator.indexOf("--context-length"), coordinator.indexOf("--context-length") + 2)).toEqual(["--context-length", "4096"]);
    expect(driver.stageArgv({ ...topology, contextLength: 4096 }, topology.stages[0]!, files)).not.toContain("--context-length");
    // mlxcel is not told: no flag of its is known to bound a request's context.
    expect(createDriver("mlxcel", { extraArgs: [] }).coordinatorArgv({ ...topology, contextLength: 4096 }, files)).not.toContain("--context-length");
  });

  it("passes --threads where the topology sets it (stages sharing a machine; the coordinator), and leaves shard-engine's default otherwise", () => {
    const driver = createDriver("reference", { extraArgs: ["--connect-timeout-ms", "5000"] });
    expect(driver.stageArgv(topology, topology.stages[0]!, files)).not.toContain("--threads");
    expect(driver.coordinatorArgv(topology, files)).not.toContain("--threads");
    const shared: EngineTopology = {
      ...topology,
      stages: topology.stages.map((s) => ({ ...s, threads: 4 })),
      coordinator: { ...topology.coordinator, threads: 1 },
    };
    const stage = driver.stageArgv(shared, shared.stages[1]!, files);
    expect(stage.slice(-4)).toEqual(["--threads", "4", "--connect-timeout-ms", "5000"]);
    expect(driver.coordinatorArgv(shared, files).slice(-4)).toEqual(["--threads", "1", "--connect-timeout-ms", "5000"]);
  });
});
