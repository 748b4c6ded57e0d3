import type { DriverOptions, EngineDriver, EngineTopology, ProcessFiles, StageSlot } from "../types.js";
import { renderMlxcelClusterToml } from "./cluster-toml.js";
import { mlxcelFacts } from "./facts.js";
import { mlxcelServerArgv } from "./server-argv.js";

/**
 * The production engine, `mlxcel-server`, started with its distributed-mode flags: every process
 * reads the same cluster TOML and finds its own entry by `--node-id`.
 */
export function createMlxcelDriver(options: DriverOptions): EngineDriver {
  const binary = options.binary ?? mlxcelFacts.defaultBinary;
  return {
    facts: mlxcelFacts,
    clusterConfigName: "cluster.toml",
    renderClusterConfig: renderMlxcelClusterToml,
    // Every stage at once: each loads its layers while the others do, then listens.
    startOrder: (topology) => [topology.stages.map((s) => s.index)],
    stageArgv(_topology: EngineTopology, stage: StageSlot, files: ProcessFiles): string[] {
      return [...mlxcelServerArgv([binary], files, stage.id, stage.address), "--no-warmup", ...options.extraArgs];
    },
    coordinatorArgv(topology: EngineTopology, files: ProcessFiles): string[] {
      const { http, id } = topology.coordinator;
      return [...mlxcelServerArgv([binary], files, id, http), ...options.extraArgs];
    },
    versionArgv: () => [binary, "--version"],
  };
}
