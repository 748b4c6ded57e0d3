/**
 * Connection limits of one HTTP server. Two things let clients hold a server's descriptors: a
 * request head that never ends (a header line every few seconds: node waits 60 s by default, and
 * checks only every 30 s), and sheer numbers. So a request's head must arrive within 10 s
 * (checked every second), and past `maxConnections` open connections node drops
 * each new one at once; the limit is a share of the process's descriptors, so whatever else the
 * process does (a daemon's SSH sessions and commands, a coordinator's stage links) keeps the rest.
 */
import type { Server, ServerOptions } from "node:http";
import { openFileLimit } from "./open-file-limit.js";

/** A request head takes milliseconds to send: 10 s allows a slow link and leaves a stalled client little. */
const headersTimeoutMs = 10_000;

/**
 * The most connections of a server that may take `share` of the process's descriptors (a fraction):
 * at most `most`, at least 32.
 */
export function connectionLimit(share: number, most: number): number {
  return Math.max(32, Math.min(most, Math.floor(openFileLimit() * share)));
}

/** Options for createServer carrying the head's deadline (node reads the checking interval only there). */
export function limitedServerOptions(requestTimeoutMs: number): ServerOptions {
  return { headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs), requestTimeout: requestTimeoutMs, connectionsCheckingInterval: 1_000 };
}

/** Least time between two warnings of dropped connections, ms (a flood drops thousands a second). */
const warnEveryMs = 10_000;

/**
 * Apply the connection cap to `server`. Each dropped connection is counted, and `warn` hears of
 * them at most every 10 s, with the count since the last word.
 */
export function limitConnections(server: Server, maxConnections: number, warn: (dropped: number, limit: number) => void): void {
  server.maxConnections = maxConnections;
  let dropped = 0;
  let lastWarning = -Infinity;
  server.on("drop", () => {
    dropped++;
    const now = performance.now();
    if (now - lastWarning < warnEveryMs) return;
    lastWarning = now;
    warn(dropped, maxConnections);
    dropped = 0;
  });
}
