/**
 * src/spec: cluster definitions and settings. TOML → zod → frozen, fully defaulted camelCase values,
 * every problem reported with file:line:col and path; revision identities; the generated JSON Schemas.
 */
export { SpecError } from "./spec-error.js";
export type { Accelerator, ClusterSpec, NodeEntry, ParseResult, Settings, SpecIssue, TransportBackend } from "./types.js";
export { parseSettings, loadSettings } from "./parse-settings.js";
export { parseCluster, loadCluster, stemOf } from "./parse-cluster.js";
export { formatIssue, formatPath } from "./issues.js";
export { computeRevision, definitionDigest, stableStringify } from "./revision.js";
export { parseSize } from "./size.js";
export { parsePortRange, countPorts, type PortRange } from "./port-range.js";
export { renderSchemas, writeSchemas } from "./render-schemas.js";
export { definitionsDirMissing, findClusterFiles } from "./find-cluster-files.js";
export { holdsSettings } from "./holds-settings.js";
export { readClusterText, readSettingsText, maxDefinitionBytes, maxSettingsBytes } from "./read-spec-file.js";
export { tomlBounds } from "./toml-bounds.js";
export { resolveLocalPath } from "./local-path.js";
export { allowed, patterns } from "./patterns.js";
export { canonicalHost, ipv4OfMapped, isLinkLocalAddress } from "./host.js";
export { controlNodeName } from "./control-node.js";
export { isLoopbackAddress, hostOf } from "./loopback.js";
export { clusterSchema } from "./cluster-schema.js";
export { settingsSchema } from "./settings-schema.js";
