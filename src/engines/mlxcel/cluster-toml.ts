import { isIPv6 } from "node:net";
import { stringify } from "smol-toml";
import type { EngineTopology } from "../types.js";

/**
 * mlxcel's cluster TOML: `[cluster]` (name, tensor_parallel_size 1, pipeline_parallel_size, the
 * transport backend) then one `[[nodes]]` per node, the coordinator first as `hybrid`, then the
 * stages as `pipeline_stage` with their index. Stages get an explicit `layers = [start, end]` only
 * when asked: an extension mlxcel does not read, for engines that accept explicit layers.
 * Addresses are socket addresses as Rust writes and parses them (mlxcel's `SocketAddr`, and
 * shard-engine's reader): `10.0.0.2:39601`, and an IPv6 address in brackets, `[fd00::2]:39601`;
 * unbracketed, `fd00::2:39601` reads as neither.
 */
export function renderMlxcelClusterToml(topology: EngineTopology): string {
  const address = (e: { host: string; port: number }): string => (isIPv6(e.host) ? `[${e.host}]:${e.port}` : `${e.host}:${e.port}`);
  const document = {
    cluster: {
      name: topology.cluster,
      tensor_parallel_size: 1,
      pipeline_parallel_size: topology.stages.length,
      transport_backend: topology.transport,
    },
    nodes: [
      { id: topology.coordinator.id, address: address(topology.coordinator.address), role: "hybrid" },
      ...topology.stages.map((stage) => ({
        id: stage.id,
        address: address(stage.address),
        role: "pipeline_stage",
        stage: stage.index,
        ...(topology.explicitLayers ? { layers: [...stage.layers] } : {}),
      })),
    ],
  };
  return `# Written by shardctl for cluster "${topology.cluster}"; regenerated on every launch.\n${stringify(document)}\n`;
}
