/**
 * Limits every HTTP server of shardctl puts on its clients' connections (the router, the dashboard,
 * shard-engine's coordinator), so that clients that open connections and never finish a request
 * cannot use up the process's descriptors.
 */
export { connectionLimits, limitConnections, limitedServerOptions, type ConnectionLimits } from "./connection-limits.js";
export { openFileLimit } from "./open-file-limit.js";
