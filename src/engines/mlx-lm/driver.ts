import type { DriverOptions, EngineDriver, EngineTopology, ProcessFiles, StageSlot } from "../types.js";
import { capConcurrency } from "./concurrency.js";
import { mlxLmFacts } from "./facts.js";
import { selectHubCache } from "./hub-cache.js";
import { renderRingHostfile, ringStartOrder } from "./ring-hostfile.js";
import { rankOfStage } from "./split-layers.js";

/**
 * mlx-lm's server, one process per rank, started by shardctl itself: `env` sets the ring's
 * variables (rank, hostfile, verbose ring log for the launch to wait on), keeps the Hugging Face
 * hub offline with a cache directory of the launch, and unbuffers Python's output so log lines
 * arrive as they are printed. Every rank is given rank 0's HTTP address; only rank 0 binds it,
 * and every rank is held to `max_sequences` concurrent requests (each runs the same batches).
 */
export function createMlxLmDriver(options: DriverOptions): EngineDriver {
  const python = options.python ?? mlxLmFacts.defaultBinary;
  return {
    facts: mlxLmFacts,
    clusterConfigName: "hostfile.json",
    renderClusterConfig: renderRingHostfile,
    startOrder: ringStartOrder,
    stageArgv(topology: EngineTopology, stage: StageSlot, files: ProcessFiles): string[] {
      const { http } = topology.coordinator;
      return [
        "env",
        `MLX_RANK=${rankOfStage(stage.index, topology.stages.length)}`,
        `MLX_HOSTFILE=${files.clusterConfig}`,
        "MLX_RING_VERBOSE=1",
        "HF_HUB_OFFLINE=1",
        `HF_HUB_CACHE=${selectHubCache(files)}`,
        "PYTHONUNBUFFERED=1",
        python,
        "-m",
        "mlx_lm.server",
        "--model",
        files.modelDir,
        "--pipeline",
        "--host",
        http.host,
        "--port",
        String(http.port),
        ...capConcurrency(topology.maxSequences),
        ...options.extraArgs,
      ];
    },
    coordinatorArgv(): string[] {
      throw new Error("mlx-lm has no coordinator process: rank 0 (the last layers) serves HTTP");
    },
    versionArgv: () => mlxLmFacts.versionCommand({ python }),
  };
}
