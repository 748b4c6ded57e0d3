import { renderMlxcelClusterToml } from "./cluster-toml.js";
import type { DriverOptions, EngineDriver, EngineTopology, ProcessFiles, StageSlot } from "./types.js";

/** The production engine, `mlxcel-server`, started with the documented flags (REFERENCE.md). */
export function createMlxcelDriver(options: DriverOptions): EngineDriver {
  const binary = options.binary ?? "mlxcel-server";
  return {
    kind: "mlxcel",
    // mlxcel has no transport authentication: trusted network segments only.
    authenticatesTransport: false,
    // mlxcel computes its own split and cannot be told another one.
    acceptsExplicitLayers: false,
    renderClusterConfig: renderMlxcelClusterToml,
    stageArgv(_topology: EngineTopology, stage: StageSlot, files: ProcessFiles): string[] {
      return [
        binary, "-m", files.modelDir, "--distributed-config", files.clusterConfig, "--node-id", stage.id,
        "--host", stage.address.host, "--port", String(stage.address.port), "--no-warmup", ...options.extraArgs,
      ];
    },
    coordinatorArgv(topology: EngineTopology, files: ProcessFiles): string[] {
      const { http, id } = topology.coordinator;
      return [
        binary, "-m", files.modelDir, "--distributed-config", files.clusterConfig, "--node-id", id,
        "--host", http.host, "--port", String(http.port), ...options.extraArgs,
      ];
    },
    versionArgv: () => [binary, "--version"],
  };
}
