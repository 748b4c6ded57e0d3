/**
 * Limits every HTTP server of shardctl puts on its clients' connections (the router, the dashboard,
 * shard-engine's coordinator), so that clients that open connections and never finish a request
 * cannot use up the process's descriptors.
 */
export { connectionLimit, limitConnections, limitedServerOptions } from "./connection-limits.js";
