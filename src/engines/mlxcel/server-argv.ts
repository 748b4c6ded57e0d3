import type { Endpoint, ProcessFiles } from "../types.js";

/**
 * The command line every mlxcel-compatible process starts with: the program, the model, the
 * cluster TOML, its own entry's id and the address it binds. Engines that are command-line
 * compatible with mlxcel-server (shard-engine) append their own flags after it.
 */
export function mlxcelServerArgv(program: readonly string[], files: ProcessFiles, nodeId: string, bind: Endpoint): string[] {
  return [...program, "-m", files.modelDir, "--distributed-config", files.clusterConfig, "--node-id", nodeId, "--host", bind.host, "--port", String(bind.port)];
}
