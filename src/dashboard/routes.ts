/**
 * The dashboard's endpoints. Reads carry the status schema's shapes (schemas/status.schema.json);
 * the one write is "Reconcile now", the same request `shardctl reconcile` makes, behind the bearer
 * token when one is configured. The page never edits a definition and nothing here writes one.
 */
import type { IncomingMessage, ServerResponse } from "node:http";
import type { Logger } from "pino";
import { isShardctlError, messageOf } from "../errors/index.js";
import { allowed, patterns } from "../spec/index.js";
import type { ClusterStatus } from "../reconciler/index.js";
import type { Asset } from "./assets.js";
import { frame, type EventStream } from "./event-stream.js";
import { readBody, replyError, replyJson } from "./http-replies.js";
import { bearerTokenOf, tokenMatches } from "./token.js";
import type { DashboardSource } from "./types.js";

/** Longest cluster name, characters: a DNS label's. */
const maxNameLength = 63;

/** Largest definition `POST /api/plan` accepts, bytes. */
const planBodyLimitBytes = 256 * 1024;

export interface RouteContext {
  source: DashboardSource;
  token: string | undefined;
  stream: EventStream;
  assets: Map<string, Asset>;
  /** When the dashboard started (RFC 3339): the page tells a daemon restart by its change. */
  startedAt: string;
  log: Logger;
  /** Set once the daemon stops: the stream goes on (its last statuses reach the pages), but no request is taken. */
  stopping: boolean;
}

/** One endpoint: the paths it answers (a capture, when it has one, is the cluster's name), the methods it takes, what it does. */
interface Endpoint {
  path: RegExp;
  methods: readonly string[];
  handle(context: RouteContext, request: IncomingMessage, response: ServerResponse, match: RegExpExecArray, url: URL): Promise<void>;
}

const endpoints: readonly Endpoint[] = [
  {
    path: /^\/api\/clusters$/,
    methods: ["GET", "HEAD"],
    handle: async (context, _request, response) => replyJson(response, 200, await allStatuses(context.source)),
  },
  { path: /^\/api\/clusters\/([^/]+)$/, methods: ["GET", "HEAD"], handle: (context, _request, response, match) => replyStatus(context, response, decodeName(match[1]!)) },
  {
    path: /^\/api\/clusters\/([^/]+)\/reconcile$/,
    methods: ["POST"],
    handle: (context, request, response, match) => reconcileNow(context, request, response, decodeName(match[1]!)),
  },
  { path: /^\/api\/plan$/, methods: ["POST"], handle: (context, request, response, _match, url) => previewPlan(context, request, response, url) },
  { path: /^\/api\/events$/, methods: ["GET"], handle: async (context, _request, response) => openStream(context, response) },
];

export async function route(context: RouteContext, request: IncomingMessage, response: ServerResponse): Promise<void> {
  const url = new URL(request.url ?? "/", "http://dashboard.invalid");
  const path = url.pathname;
  const method = request.method ?? "GET";
  for (const endpoint of endpoints) {
    const match = endpoint.path.exec(path);
    if (match === null) continue;
    if (endpoint.methods.includes(method)) {
      if (context.stopping && method === "POST") {
        return replyError(response, 503, "DashboardDaemonStopping", `the daemon is stopping: it takes no request now; its page shows what it does until it stops`);
      }
      return endpoint.handle(context, request, response, match, url);
    }
    return replyError(response, 405, "DashboardMethodNotAllowed", `${method} is not allowed on ${path}; it takes ${endpoint.methods.join(" or ")}`, {
      allow: endpoint.methods.join(", "),
    });
  }
  if (path.startsWith("/api/")) return replyError(response, 404, "DashboardNotFound", `no endpoint ${method} ${path}`);
  if (method === "GET" || method === "HEAD") return serveAsset(context, request, response, path);
  return replyError(response, 405, "DashboardMethodNotAllowed", `${method} is not allowed on ${path}; the page's files take GET or HEAD`, { allow: "GET, HEAD" });
}

async function replyStatus(context: RouteContext, response: ServerResponse, name: string): Promise<void> {
  const status = (await allStatuses(context.source)).find((s) => s.cluster === name);
  if (status !== undefined) return replyJson(response, 200, status);
  // A definition the daemon has not looked at yet is not a name that does not exist: a script
  // polling a cluster it just committed waits on the one, and stops on the other.
  // Only a valid name is looked for as a file: a path segment is anyone's (`..%2F`).
  if (patterns.name.test(name) && (await context.source.hasCluster(name).catch(() => false)))
    return replyError(
      response,
      404,
      "DashboardClusterNotChecked",
      `the cluster ${JSON.stringify(name)} is defined but has no status yet: the daemon has not looked at it (ask again shortly)`,
    );
  return replyError(response, 404, "DashboardClusterNotFound", `no cluster named ${JSON.stringify(name)}: no definition of it in the watched directory, nor a status`);
}

/** A path segment as a name; a malformed escape is no name at all (never a cluster). */
function decodeName(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return "";
  }
}

/** Every status the daemon knows: the files on disk, each replaced by what the feed published since (fresher). */
async function allStatuses(source: DashboardSource): Promise<ClusterStatus[]> {
  return (await gatherStatuses(source)).statuses;
}

/**
 * Every status, and the clusters this daemon has not composed a status of since it started (its
 * first pass of each comes after it starts serving): those whose status is only the file an
 * earlier daemon wrote, which says what held then, and definitions whose file it cannot read (a
 * page keeps what it last had of them rather than dropping the cluster).
 */
async function gatherStatuses(source: DashboardSource): Promise<{ statuses: ClusterStatus[]; unchecked: string[] }> {
  const [read, names] = await Promise.all([source.readStatuses(), source.clusterNames()]);
  const byName = new Map(read.map((s) => [s.cluster, s]));
  const composed = source.feed.snapshot();
  for (const status of composed) byName.set(status.cluster, status);
  const statuses = [...byName.values()].sort((a, b) => a.cluster.localeCompare(b.cluster, "en", { numeric: true }));
  const fresh = new Set(composed.map((s) => s.cluster));
  const unchecked = new Set([...byName.keys(), ...names].filter((name) => !fresh.has(name)));
  return { statuses, unchecked: [...unchecked].sort((a, b) => a.localeCompare(b, "en", { numeric: true })) };
}

/** True when no token is configured or the request carries it; otherwise answers 401 and returns false. */
function authorised(context: RouteContext, request: IncomingMessage, response: ServerResponse, what: string): boolean {
  if (context.token === undefined) return true;
  const presented = bearerTokenOf(request.headers.authorization);
  if (presented !== undefined && tokenMatches(context.token, presented)) return true;
  context.log.warn({ request: what, presented: presented !== undefined }, "dashboard request refused: missing or wrong token");
  replyError(response, 401, "DashboardUnauthorized", "this dashboard needs its token: send Authorization: Bearer <token>", {
    "www-authenticate": 'Bearer realm="shardctl"',
  });
  return false;
}

async function reconcileNow(context: RouteContext, request: IncomingMessage, response: ServerResponse, name: string): Promise<void> {
  if (!authorised(context, request, response, `reconcile ${name}`)) return;
  if (!patterns.name.test(name) || !(await context.source.hasCluster(name))) {
    return replyError(response, 404, "DashboardClusterNotFound", `no cluster definition named ${JSON.stringify(name)} in the watched directory`);
  }
  context.log.info({ cluster: name }, "reconcile requested from the dashboard");
  if (!(await context.source.requestReconcile(name))) {
    return replyError(response, 504, "ReconcileRequestTimeout", `the daemon did not take the request for ${name} in time; it is still queued`);
  }
  replyJson(response, 202, { cluster: name, taken: true });
}

async function previewPlan(context: RouteContext, request: IncomingMessage, response: ServerResponse, url: URL): Promise<void> {
  // Planning reads model files and may probe nodes: with a token configured, only its holders may ask.
  if (!authorised(context, request, response, "plan preview")) return;
  const name = url.searchParams.get("name") ?? "preview";
  if (!patterns.name.test(name) || name.length > maxNameLength) {
    return replyError(
      response,
      400,
      "DashboardBadRequest",
      `?name=${JSON.stringify(name.slice(0, 80))}${name.length > 80 ? "…" : ""} is not a cluster name: ${patterns.name.test(name) ? `${name.length} characters, more than ${maxNameLength}` : allowed.name}`,
    );
  }
  let text: string;
  try {
    text = await readBody(request, planBodyLimitBytes);
  } catch (error) {
    return replyError(response, 413, "DashboardBadRequest", messageOf(error));
  }
  if (text.trim() === "") return replyError(response, 400, "DashboardBadRequest", "the body must be a cluster definition (TOML)");
  const probe = url.searchParams.get("probe") === "true";
  try {
    const preview = await context.source.previewPlan(text, name, { probe });
    replyJson(response, preview.plan === undefined ? 422 : 200, preview);
  } catch (error) {
    if (!isShardctlError(error)) context.log.error({ err: error }, "plan preview failed unexpectedly");
    replyJson(response, 422, {
      cluster: name,
      feasible: false,
      errors: [{ reason: isShardctlError(error) ? error.reason : "PlanFailed", message: messageOf(error) }],
      issues: [],
    });
  }
}

/**
 * The live stream: `hello` (the token question, the beat interval, the cluster names and which of
 * them this daemon has not checked yet), a `status` per cluster, a `statusFile` per status file the
 * daemon could not write, then every change and a `beat` every heartbeatMs.
 */
async function openStream(context: RouteContext, response: ServerResponse): Promise<void> {
  const release = context.stream.reserve();
  if (release === undefined) {
    return replyError(
      response,
      503,
      "DashboardBusy",
      `${context.stream.maxClients} pages are following this daemon already, the most it serves at once; close one of them (the page retries by itself)`,
      { "retry-after": "5" },
    );
  }
  const { statuses, unchecked } = await gatherStatuses(context.source).finally(release);
  const hello = {
    tokenRequired: context.token !== undefined,
    startedAt: context.startedAt,
    heartbeatMs: context.stream.heartbeatMs,
    clusters: statuses.map((s) => s.cluster),
    unchecked,
  };
  const files = [...context.source.feed.failedFiles()].map(([cluster, failure]) => frame("statusFile", { cluster, failure }));
  context.stream.attach(response, frame("hello", hello) + statuses.map((s) => frame("status", s)).join("") + files.join(""));
}

function serveAsset(context: RouteContext, request: IncomingMessage, response: ServerResponse, path: string): void {
  const asset = context.assets.get(path === "/" ? "/index.html" : path);
  if (asset === undefined) {
    if (context.assets.size === 0) return replyError(response, 503, "DashboardAssetsMissing", "the dashboard page is not built: run `npm run build`");
    return replyError(response, 404, "DashboardNotFound", `no file ${path}`);
  }
  const gzip = /\bgzip\b/.test(request.headers["accept-encoding"] ?? "");
  const body = gzip ? asset.gzip : asset.body;
  response.writeHead(200, {
    "content-type": asset.type,
    "content-length": body.length,
    "cache-control": asset.immutable ? "public, max-age=31536000, immutable" : "no-cache",
    vary: "accept-encoding",
    ...(gzip ? { "content-encoding": "gzip" } : {}),
  });
  response.end(request.method === "HEAD" ? undefined : body);
}
