/**
 * The coordinator's limits on its clients' connections, so that clients that open connections and
 * never finish a request cannot use up its descriptors (which its stage links need): a request's
 * head must arrive within 10 s (checked every second; node waits 60 s by default and checks every
 * 30), and past half of the process's descriptors (at most 4096 connections) node drops each new
 * connection at once. The control plane's servers follow the same rule (src/http-limits);
 * shard-engine is a program of its own and keeps its copy.
 */
import { readFileSync } from "node:fs";
import type { ServerOptions } from "node:http";
import type { Server as NetServer } from "node:net";
import type { Logger } from "../log.js";

/** Longest a request's head may take to arrive, ms. */
const headersTimeoutMs = 10_000;
/** Least time between two warnings of dropped connections, ms. */
const warnEveryMs = 10_000;

/** Options for createServer (node reads the checking interval only there). */
export function limitedServerOptions(requestTimeoutMs: number): ServerOptions {
  return { headersTimeout: Math.min(headersTimeoutMs, requestTimeoutMs), requestTimeout: requestTimeoutMs, connectionsCheckingInterval: 1_000 };
}

/**
 * Cap `server`'s connections at `share` of the descriptors (half by default; 32 to 4096), warning of
 * drops at most every 10 s. The transport's listeners are capped too (a peer that has not finished
 * its handshake is cut after 10 s): a flood of them must leave the process the descriptors it reads
 * its own memory and writes its log with.
 */
export function limitConnections(server: NetServer, log: Logger, share = 1 / 2): void {
  const limit = Math.max(32, Math.min(4096, Math.floor(openFileLimit() * share)));
  server.maxConnections = limit;
  let dropped = 0;
  let lastWarning = -Infinity;
  server.on("drop", () => {
    dropped++;
    const now = performance.now();
    if (now - lastWarning < warnEveryMs) return;
    lastWarning = now;
    log.warn({ dropped, limit }, "connections dropped: this many clients hold connections already (clients that send no request are cut after 10 s)");
    dropped = 0;
  });
}

/** RLIMIT_NOFILE's soft limit (Node raises it to the hard one at start): /proc on Linux, else 1024. */
function openFileLimit(): number {
  try {
    const line = readFileSync("/proc/self/limits", "utf8")
      .split("\n")
      .find((l) => l.startsWith("Max open files"));
    const soft = line?.slice("Max open files".length).trim().split(/\s+/)[0];
    if (soft === "unlimited") return Number.MAX_SAFE_INTEGER;
    const n = Number(soft);
    return Number.isSafeInteger(n) && n > 0 ? n : 1024;
  } catch {
    return 1024;
  }
}
