import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { renderMlxcelClusterToml } from "./cluster-toml.js";
import type { DriverOptions, EngineDriver, EngineTopology, ProcessFiles, StageSlot } from "./types.js";

/**
 * The absolute path of this installation's shard-engine entry point. It serves local nodes and
 * SSH nodes that share this file system; `[engine] binary` overrides it for other machines.
 * Run from source (vitest, tsx) this module sits in src/, beside shard-engine.ts only: node cannot
 * run that directly, so the build's dist/src/cli/shard-engine.js is used instead.
 */
export const bundledShardEngine = locateShardEngine();

function locateShardEngine(): string {
  const beside = fileURLToPath(new URL("../../cli/shard-engine.js", import.meta.url));
  if (existsSync(beside) || !import.meta.url.endsWith(".ts")) return beside;
  return fileURLToPath(new URL("../../../dist/src/cli/shard-engine.js", import.meta.url));
}

/** The reference engine, `shard-engine`: mlxcel's flags plus a transport token and explicit layers. */
export function createReferenceDriver(options: DriverOptions): EngineDriver {
  const program = options.binary === undefined ? [process.execPath, bundledShardEngine] : [options.binary];
  return {
    kind: "reference",
    authenticatesTransport: true,
    acceptsExplicitLayers: true,
    renderClusterConfig: renderMlxcelClusterToml,
    stageArgv(_topology: EngineTopology, stage: StageSlot, files: ProcessFiles): string[] {
      return [
        ...program, "-m", files.modelDir, "--distributed-config", files.clusterConfig, "--node-id", stage.id,
        "--host", stage.address.host, "--port", String(stage.address.port), "--no-warmup",
        "--transport-token-file", files.tokenFile, ...options.extraArgs,
      ];
    },
    coordinatorArgv(topology: EngineTopology, files: ProcessFiles): string[] {
      const { http, id } = topology.coordinator;
      return [
        ...program, "-m", files.modelDir, "--distributed-config", files.clusterConfig, "--node-id", id,
        "--host", http.host, "--port", String(http.port), "--transport-token-file", files.tokenFile,
        "--model-name", topology.modelName, ...options.extraArgs,
      ];
    },
    versionArgv: () => [...program, "--version"],
  };
}
