import type { DriverOptions, EngineDriver, EngineTopology, ProcessFiles, StageSlot } from "../types.js";
import { renderMlxcelClusterToml } from "./cluster-toml.js";
import { mlxcelFacts } from "./facts.js";

/**
 * The production engine, `mlxcel-server`, started with its distributed-mode flags: every process
 * reads the same cluster TOML and finds its own entry by `--node-id`.
 */
export function createMlxcelDriver(options: DriverOptions): EngineDriver {
  const binary = options.binary ?? mlxcelFacts.defaultBinary;
  return {
    facts: mlxcelFacts,
    renderClusterConfig: renderMlxcelClusterToml,
    stageArgv(_topology: EngineTopology, stage: StageSlot, files: ProcessFiles): string[] {
      return [
        binary,
        "-m",
        files.modelDir,
        "--distributed-config",
        files.clusterConfig,
        "--node-id",
        stage.id,
        "--host",
        stage.address.host,
        "--port",
        String(stage.address.port),
        "--no-warmup",
        ...options.extraArgs,
      ];
    },
    coordinatorArgv(topology: EngineTopology, files: ProcessFiles): string[] {
      const { http, id } = topology.coordinator;
      return [
        binary,
        "-m",
        files.modelDir,
        "--distributed-config",
        files.clusterConfig,
        "--node-id",
        id,
        "--host",
        http.host,
        "--port",
        String(http.port),
        ...options.extraArgs,
      ];
    },
    versionArgv: () => [binary, "--version"],
  };
}
