/** The engine's cluster TOML (mlxcel format + optional per-stage `layers`). */
export { readClusterConfig, validateCluster, computeStageRanges, ClusterConfigError, type ClusterConfig, type ClusterNode } from "./cluster-toml.js";
