import { mlxcelServerArgv, renderMlxcelClusterToml } from "../mlxcel/index.js";
import type { DriverOptions, EngineDriver, EngineTopology, ProcessFiles, StageSlot } from "../types.js";
import { bundledShardEngineCommand } from "./bundled-binary.js";
import { referenceFacts } from "./facts.js";

/**
 * The reference engine, `shard-engine`: mlxcel's flags and cluster TOML, plus a transport token
 * and explicit layers. Without `[engine] binary` it runs this installation's copy under this Node.js.
 */
export function createReferenceDriver(options: DriverOptions): EngineDriver {
  const program = options.binary === undefined ? [...bundledShardEngineCommand] : [options.binary];
  return {
    facts: referenceFacts,
    clusterConfigName: "cluster.toml",
    renderClusterConfig: renderMlxcelClusterToml,
    // Every stage at once: each loads its layers while the others do, then listens.
    startOrder: (topology) => [topology.stages.map((s) => s.index)],
    stageArgv(_topology: EngineTopology, stage: StageSlot, files: ProcessFiles): string[] {
      return [
        ...mlxcelServerArgv(program, files, stage.id, stage.address),
        "--no-warmup",
        "--transport-token-file",
        files.tokenFile,
        ...threadsArgs(stage.threads),
        ...options.extraArgs,
      ];
    },
    coordinatorArgv(topology: EngineTopology, files: ProcessFiles): string[] {
      const { http, id } = topology.coordinator;
      return [
        ...mlxcelServerArgv(program, files, id, http),
        "--transport-token-file",
        files.tokenFile,
        "--model-name",
        topology.modelName,
        "--max-sequences",
        String(topology.maxSequences),
        ...(topology.contextLength === undefined ? [] : ["--context-length", String(topology.contextLength)]),
        ...threadsArgs(topology.coordinator.threads),
        ...options.extraArgs,
      ];
    },
    versionArgv: () => [...program, "--version"],
  };
}

/** `--threads n` when the topology sets a thread count; shard-engine's default (every core) otherwise. */
function threadsArgs(threads: number | undefined): string[] {
  return threads === undefined ? [] : ["--threads", String(threads)];
}
