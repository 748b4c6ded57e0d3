/**
 * The dashboard's listener on `[daemon] ui_address`: the page (built into dist/ui), its JSON
 * endpoints and its event stream. Every cluster status the reconciler composes goes out to every
 * connected page at once, serialised once and only when it differs from the last one sent for
 * that cluster (an idle resync composes the same status again and again).
 *
 * Two guards besides the token: on a loopback address only loopback host names are served (a web
 * page elsewhere cannot rebind a name of its own to 127.0.0.1 and read the statuses), and a POST
 * from a page of another origin is refused.
 */
import { createServer, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import type { Logger } from "pino";
import { refuseForeignRequest } from "../browser-guard/index.js";
import { connectionLimit, limitConnections, limitedServerOptions } from "../http-limits/index.js";
import { ShardctlError, messageOf } from "../errors/index.js";
import { hostOf, isLoopbackAddress } from "../spec/index.js";
import type { ClusterStatus, StatusFileFailure } from "../reconciler/index.js";
import { defaultAssetsDir, loadAssets } from "./assets.js";
import { EventStream, frame, type EventStreamOptions } from "./event-stream.js";
import { replyError, securityHeaders } from "./http-replies.js";
import { route, type RouteContext } from "./routes.js";
import type { DashboardSource } from "./types.js";

export interface DashboardOptions {
  /** "host:port" (`[daemon] ui_address`); port 0 takes any free port. */
  address: string;
  /** The bearer token "Reconcile now" needs (see dashboardTokenOf); undefined: none (loopback only). */
  token: string | undefined;
  source: DashboardSource;
  log: Logger;
  /** The built page. Default dist/ui. */
  assetsDir?: string;
  stream?: EventStreamOptions;
}

export interface Dashboard {
  /** `http://host:port/` as bound (the real port when 0 was asked for). */
  url: string;
  /** Connected event-stream clients. */
  readonly clients: number;
  /**
   * The daemon is stopping: from now on requests (a reconcile, a plan preview) are refused (503),
   * while the streams go on, so that the pages see the statuses of the stop itself (a teardown's
   * Stopped) before close() ends them.
   */
  stopping(): void;
  /** End every stream and stop listening. */
  close(): Promise<void>;
}

export async function startDashboard(options: DashboardOptions): Promise<Dashboard> {
  const { address, token, source, log } = options;
  const host = hostOf(address);
  const port = Number(address.slice(address.lastIndexOf(":") + 1));
  const loopback = isLoopbackAddress(address);
  if (!loopback && token === undefined) {
    throw new ShardctlError("DashboardTokenMissing", `[daemon] ui_address = "${address}" is not a loopback address and no [daemon] ui_token_env token is set`, {
      terminal: true,
    });
  }
  const assetsDir = options.assetsDir ?? defaultAssetsDir;
  const assets = await loadAssets(assetsDir);
  if (assets.size === 0)
    log.warn({ reason: "DashboardAssetsMissing", dir: assetsDir }, "the dashboard page is not built (npm run build); its JSON endpoints still serve");

  // An eighth of the daemon's descriptors at most (beside the router's quarter): its supervision keeps the rest.
  const maxConnections = connectionLimit(1 / 8, 1024);
  // Streams take half the connections at most: past that a page is told 503 with Retry-After (not
  // cut by the connection cap), and the JSON endpoints still answer a script.
  const stream = new EventStream({ maxClients: Math.max(1, Math.min(256, Math.floor(maxConnections / 2))), ...options.stream });
  const context: RouteContext = { source, token, stream, assets, startedAt: new Date().toISOString(), log, stopping: false };

  // One serialisation per change, whatever the number of pages.
  const lastSent = new Map<string, string>();
  const onStatus = (status: ClusterStatus): void => {
    // Nobody watching: nothing to serialise (a page that connects gets every status on connecting).
    if (stream.size === 0) {
      lastSent.delete(status.cluster);
      return;
    }
    const text = frame("status", status);
    if (lastSent.get(status.cluster) === text) return;
    lastSent.set(status.cluster, text);
    stream.send(text);
  };
  const onRemoved = (cluster: string): void => {
    lastSent.delete(cluster);
    stream.send(frame("removed", { cluster }));
  };
  // A status file behind the status shown (or written again): the page says so beside the status.
  const onFile = (cluster: string, failure: StatusFileFailure | undefined): void => stream.send(frame("statusFile", { cluster, failure: failure ?? null }));
  source.feed.on("status", onStatus);
  source.feed.on("removed", onRemoved);
  source.feed.on("file", onFile);

  const server = createServer(limitedServerOptions(60_000), (request, response) => {
    for (const [name, value] of Object.entries(securityHeaders)) response.setHeader(name, value);
    const refusal = refuseForeignRequest(request, { loopback, what: "this dashboard" });
    if (refusal !== undefined) return replyError(response, 403, "DashboardForbidden", refusal);
    route(context, request, response).catch((error: unknown) => fail(response, error, log));
  });
  limitConnections(server, maxConnections, (dropped, limit) =>
    log.warn({ dropped, limit }, "dashboard connections dropped: this many clients hold connections already (clients that send no request are cut after 10 s)"),
  );
  await new Promise<void>((resolve, reject) => {
    server.once("error", (error) =>
      reject(
        new ShardctlError(
          "DashboardListenFailed",
          `the dashboard cannot listen on ${address} ([daemon] ui_address in the settings file): ${messageOf(error)}; choose a free address there, or stop what holds it`,
          {
            terminal: true,
            cause: error,
          },
        ),
      ),
    );
    server.listen({ host, port }, resolve);
  });
  const bound = server.address() as AddressInfo;
  const shown = bound.family === "IPv6" ? `[${bound.address}]` : bound.address;
  return {
    url: `http://${shown}:${bound.port}/`,
    get clients() {
      return stream.size;
    },
    stopping: () => {
      context.stopping = true;
    },
    close: async () => {
      source.feed.off("status", onStatus);
      source.feed.off("removed", onRemoved);
      source.feed.off("file", onFile);
      stream.close();
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
    },
  };
}

function fail(response: ServerResponse, error: unknown, log: Logger): void {
  log.error({ err: error }, "dashboard request failed");
  if (!response.headersSent) replyError(response, 500, "InternalError", messageOf(error));
  else response.destroy();
}
