/**
 * The embedded router: an OpenAI-compatible HTTP front that reads a continuum-router YAML config,
 * routes each request by its `model` to a backend listing it, and reloads the file when it changes.
 * One process on a single machine and in tests; production uses a real continuum-router.
 */
import { Agent as HttpAgent, createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { Agent as HttpsAgent } from "node:https";
import type { AddressInfo } from "node:net";
import { resolve } from "node:path";
import { pino, type Logger } from "pino";
import { refuseForeignRequest } from "../browser-guard/index.js";
import { connectionLimit, limitConnections, limitedServerOptions } from "../http-limits/index.js";
import { ShardctlError } from "../errors/index.js";
import { isLoopbackAddress } from "../spec/index.js";
import { sendJson, sendOpenAIError } from "./openai-error.js";
import { proxyRequest, type ProxyContext } from "./proxy-request.js";
import { normaliseRequestPath } from "./normalise-path.js";
import { readRouterConfig } from "./read-router-config.js";
import { noMarks, readRelaunchMarks, relaunchFileOf, relaunchMsLeft, type RelaunchMarks } from "./relaunch-marks.js";
import { createRouteTable, type RouteTable } from "./route-table.js";
import { findModelField, type ByteSpan } from "./find-model-field.js";
import type { RouterConfig } from "./types.js";
import { watchConfig } from "./watch-config.js";
import { joinHostPort } from "../nodes/index.js";

export type RouterOptions = {
  configFile: string;
  /** Overrides `server.bind_address`'s host. Default from the file, else 127.0.0.1. */
  host?: string;
  /** Overrides `server.bind_address`'s port; 0 picks a free port. Default from the file, else 8080. */
  port?: number;
  /** Names `host`/`port` in the error when the router cannot listen, e.g. "--host/--port". Default "the host/port options". */
  overrideSource?: string;
  /** Default: pino JSON on stderr at level `info`. */
  logger?: Logger;
  /** Reload when the file changes. Default true. */
  watch?: boolean;
  /** Quiet time after a file event before reloading, milliseconds. Default 50. */
  reloadDebounceMs?: number;
  /** Deadline for connecting to a backend, milliseconds. Default 5000. */
  connectTimeoutMs?: number;
  /**
   * Longest a backend may send nothing while a request waits on it (its head, or the next bytes of
   * its answer), milliseconds: then 504 `upstream_timeout`, or, mid-stream, an error event of that
   * code. Default 600000 (10 minutes: a long answer that is not streamed sends nothing until done).
   */
  upstreamIdleMs?: number;
  /** Longest a client may read nothing of an answer the backend has more of, milliseconds; then both are let go. Default 60000. */
  clientStallMs?: number;
  /** How long a backend that refused a connection is passed over, milliseconds. Default 2000. */
  cooldownMs?: number;
  /** Largest request body accepted, bytes. Default 32 MiB. */
  maxBodyBytes?: number;
  /**
   * Request bodies held at once, all requests together, bytes. Default 256 MiB. A body is held from
   * its first byte until its answer is complete (it is sent again to the next backend when one is
   * unreachable); past this a request is answered 503 with Retry-After. The embedded router runs in
   * the daemon: clients sending many large bodies, slowly, must not run the daemon out of memory.
   */
  maxBufferedBytes?: number;
  /**
   * Retry-After (seconds) of the 503 for a model being relaunched; never past the mark's expiry.
   * Default 2: the official OpenAI clients retry a 503 twice, honouring Retry-After, so a client
   * waits about 4 s in all — a relaunch of a small model — before it sees the 503 itself.
   */
  relaunchRetryAfterSeconds?: number;
};

export type RunningRouter = {
  /** `http://host:port` the router listens on. */
  url: string;
  /** Re-reads the config; a broken file keeps the last good config (logged) and resolves false. */
  reload(): Promise<boolean>;
  close(): Promise<void>;
};

export async function startRouter(options: RouterOptions): Promise<RunningRouter> {
  const {
    watch = true,
    reloadDebounceMs = 50,
    connectTimeoutMs = 5000,
    upstreamIdleMs = 600_000,
    clientStallMs = 60_000,
    cooldownMs = 2000,
    maxBodyBytes = 32 * 1024 * 1024,
    maxBufferedBytes = 256 * 1024 * 1024,
    relaunchRetryAfterSeconds = 2,
  } = options;
  // Bytes of request bodies held now, all requests together (see maxBufferedBytes).
  const held = { bytes: 0, limit: maxBufferedBytes };
  const configFile = resolve(options.configFile);
  const marksFile = relaunchFileOf(configFile);
  const log = options.logger ?? pino({ name: "router" }, pino.destination(2));

  // Read the config: a broken file at start-up is an error; later ones only keep the last good config.
  let config: RouterConfig = await readRouterConfig(configFile);
  let table: RouteTable = createRouteTable(config.backends);
  // Models being relaunched (the marks file beside the config); advisory, so a broken file is logged and read as none.
  const readMarks = (): Promise<RelaunchMarks> =>
    readRelaunchMarks(marksFile).catch((error: unknown) => {
      log.error({ err: error, file: marksFile }, "relaunch marks not read; no model is treated as relaunching");
      return noMarks();
    });
  let marks: RelaunchMarks = await readMarks();
  const host = options.host ?? config.bind?.host ?? "127.0.0.1";
  const port = options.port ?? config.bind?.port ?? 8080;

  // Keep-alive to backends: a fresh TCP connection per request would cost more than the whole proxy hop.
  const agents = { http: new HttpAgent({ keepAlive: true }), https: new HttpsAgent({ keepAlive: true }) };
  const context: ProxyContext = { agents, connectTimeoutMs, idleTimeoutMs: upstreamIdleMs, clientStallMs };

  const reload = async (): Promise<boolean> => {
    // Both files are read before either is applied: a request served between the two reads would
    // otherwise see a registration's cleared mark without its backend, and answer 404.
    const nextMarks = await readMarks();
    try {
      const next = await readRouterConfig(configFile);
      marks = nextMarks;
      if (JSON.stringify(next) === JSON.stringify(config)) return true;
      if (JSON.stringify(next.bind) !== JSON.stringify(config.bind)) {
        log.warn({ bind: next.bind }, "server.bind_address changed; restart the router to apply it");
      }
      config = next;
      table = createRouteTable(next.backends);
      log.info({ backends: next.backends.map((backend) => backend.name) }, "router config reloaded");
      return true;
    } catch (error) {
      marks = nextMarks;
      log.error({ err: error, file: configFile }, "router config not reloaded; keeping the last good config");
      return false;
    }
  };

  // 503 + Retry-After for a model whose cluster is being relaunched: OpenAI clients retry it, not a
  // 404. 503 `model_stalled` for one whose cluster stalled: the client learns it is no typo, and why.
  const answerRelaunching = (res: ServerResponse, model: string, stalledToo = true): boolean => {
    const left = relaunchMsLeft(marks, model, Date.now());
    const stalled = stalledToo ? marks.stalled.get(model) : undefined;
    if (left === undefined && stalled !== undefined) {
      sendOpenAIError(
        res,
        503,
        `The model \`${showModel(model)}\` is not served: its cluster \`${showModel(stalled.cluster)}\` stalled (${showModel(stalled.reason)}) and comes back only when its definition changes or someone runs \`shardctl reconcile ${showModel(stalled.cluster)}\`; its status file says why`,
        "server_error",
        "model_stalled",
        "model",
      );
      return true;
    }
    if (left === undefined) return false;
    const seconds = Math.max(1, Math.min(relaunchRetryAfterSeconds, Math.ceil(left / 1000)));
    sendOpenAIError(res, 503, `The model \`${model}\` is being relaunched; retry in ${seconds} s`, "server_error", "model_relaunching", "model", {
      "retry-after": String(seconds),
    });
    return true;
  };

  // A page in the operator's browser could otherwise run completions here (see browser-guard).
  const guard = { loopback: isLoopbackAddress(joinHostPort(host, port)), what: "this router" };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const refusal = refuseForeignRequest(req, guard);
    if (refusal !== undefined) {
      sendOpenAIError(res, 403, refusal, "invalid_request_error", "forbidden");
      req.resume();
      return;
    }
    // Route on the normalised path, and forward that: dot segments never reach a backend.
    const target = normaliseRequestPath(req.url ?? "/");
    if (!target.ok) {
      sendOpenAIError(res, 400, target.message, "invalid_request_error", "invalid_path");
      return;
    }
    const { path } = target;
    if (req.method === "GET" && (path === "/health" || path === "/healthz")) {
      sendJson(res, 200, { status: "ok" });
      return;
    }
    if (req.method === "GET" && path === "/v1/models") {
      sendJson(res, 200, { object: "list", data: table.models().map(toModelObject) });
      return;
    }
    if (req.method === "GET" && path.startsWith("/v1/models/")) {
      // The path is validated UTF-8, so decoding cannot throw; model ids may hold "/" (org/name).
      const id = decodeURIComponent(path.slice("/v1/models/".length));
      const found = table.models().find((model) => model.id === id);
      if (found !== undefined) sendJson(res, 200, toModelObject(found));
      else if (!answerRelaunching(res, id))
        sendOpenAIError(res, 404, `The model \`${showModel(id)}\` does not exist`, "invalid_request_error", "model_not_found", "model");
      return;
    }
    if (!path.startsWith("/v1/")) {
      sendOpenAIError(res, 404, `no route for ${req.method} ${path}`, "invalid_request_error", "not_found");
      return;
    }
    // Every other /v1/ path is routed by the model in a POST body: another method there is a
    // request for a route that exists with another method, as an OpenAI server answers it.
    if (req.method !== "POST") {
      res.setHeader("allow", "POST");
      sendOpenAIError(res, 405, `Method ${req.method} is not allowed on ${path}; use POST`, "invalid_request_error", "method_not_allowed");
      req.resume();
      return;
    }
    if (target.encodedSeparator) {
      sendOpenAIError(
        res,
        400,
        "an encoded '/' or '\\' (%2F, %5C) in the request path is refused: a backend could decode it into a separator",
        "invalid_request_error",
        "invalid_path",
      );
      return;
    }
    await routeByModel(req, res, `${path}${target.query}`);
  };

  const routeByModel = async (req: IncomingMessage, res: ServerResponse, forwardPath: string): Promise<void> => {
    // Read the body: the model name is inside it. Request bodies are small; responses are streamed.
    const body = await readBody(req, maxBodyBytes, held);
    if (body === "too-large") {
      sendOpenAIError(res, 413, `request body exceeds ${maxBodyBytes} bytes`, "invalid_request_error", "request_too_large");
      return;
    }
    if (body === "busy") {
      log.warn({ heldBytes: held.bytes, limit: held.limit }, "request refused: the router holds its limit of request bodies");
      sendOpenAIError(res, 503, `the router holds ${held.limit} bytes of request bodies already; retry shortly`, "server_error", "router_busy", null, {
        "retry-after": "1",
      });
      return;
    }
    if (body === "aborted") return;
    try {
      await routeBody(req, res, forwardPath, body);
    } finally {
      held.bytes -= body.length;
    }
  };

  const routeBody = async (req: IncomingMessage, res: ServerResponse, forwardPath: string, body: Buffer): Promise<void> => {
    const field = findModelField(body);
    if (field === undefined) {
      // Told apart for a body small enough to parse here at no cost to the daemon's other work.
      if (body.length <= parseToTellBytes && !isJson(body)) sendOpenAIError(res, 400, "the request body is not valid JSON", "invalid_request_error", "invalid_json");
      else sendOpenAIError(res, 400, "expected a JSON body with a string `model`", "invalid_request_error", "missing_model", "model");
      return;
    }
    const { model } = field;
    const candidates = table.candidates(model);
    if (candidates.length === 0) {
      if (!answerRelaunching(res, model))
        sendOpenAIError(res, 404, `The model \`${showModel(model)}\` does not exist`, "invalid_request_error", "model_not_found", "model");
      return;
    }
    // Try backends in order until one is reached; only connection failures move on to the next.
    const routes = table;
    for (const backend of candidates) {
      const forwarded = withUpstreamModel(body, field.spans, backend.upstream_model);
      const outcome = await proxyRequest(context, backend, req, forwardPath, forwarded, res);
      if (outcome.kind === "done") {
        routes.markUp(backend.name);
        log.debug({ model, backend: backend.name, status: outcome.status }, "routed");
        return;
      }
      if (outcome.kind === "failed") {
        log.warn({ model, backend: backend.name, err: outcome.error }, "request to backend failed");
        sendOpenAIError(res, 502, `backend ${backend.name} failed: ${outcome.error.message}`, "api_error", "bad_gateway");
        return;
      }
      if (outcome.kind === "silent") {
        log.warn({ model, backend: backend.name, err: outcome.error }, "backend silent past the router's upstream idle deadline");
        sendOpenAIError(res, 504, `backend ${backend.name}: ${outcome.error.message}`, "api_error", "upstream_timeout");
        return;
      }
      routes.markDown(backend.name, cooldownMs);
      log.warn({ model, backend: backend.name, err: outcome.error }, "backend unreachable; trying the next");
    }
    // Still listed but refusing connections: the death was seen, the deregistration not yet made
    // (another cluster's stalled mark for the same model does not speak for these backends).
    if (!answerRelaunching(res, model, false)) sendOpenAIError(res, 502, `no backend serving \`${model}\` is reachable`, "api_error", "backend_unreachable", "model");
  };

  // A quarter of the daemon's descriptors at most, so clients that hold connections can never take
  // the ones its supervision needs (commands, SSH sessions); request bodies may take 5 minutes.
  const maxConnections = connectionLimit(1 / 4, 4096);
  const server = createServer({ keepAlive: true, ...limitedServerOptions(300_000) }, (req, res) => {
    handle(req, res).catch((error: unknown) => {
      log.error({ err: error }, "router request failed");
      sendOpenAIError(res, 500, "internal router error", "server_error", "internal_error");
    });
  });
  limitConnections(server, maxConnections, (dropped, limit) =>
    log.warn({ dropped, limit }, "router connections dropped: this many clients hold connections already (clients that send no request are cut after 10 s)"),
  );
  await new Promise<void>((done, fail) => {
    server.once("error", (error) => {
      agents.http.destroy();
      agents.https.destroy();
      // Say where the address comes from, so the person whose port is taken knows what to edit.
      const origin =
        options.host !== undefined || options.port !== undefined
          ? `the address is set by ${options.overrideSource ?? "the host/port options"}`
          : config.bind === undefined
            ? `${configFile} has no server.bind_address, so the default 127.0.0.1:8080 applies; set server.bind_address there`
            : `the address is set by server.bind_address in ${configFile}`;
      fail(
        new ShardctlError(
          "RouterListenFailed",
          `router cannot listen on ${joinHostPort(host, port)}: ${error.message}; ${origin}: choose a free port, or stop what holds it`,
          {
            cause: error,
          },
        ),
      );
    });
    server.listen(port, host, () => {
      server.removeAllListeners("error");
      server.on("error", (error) => log.error({ err: error }, "router server error"));
      done();
    });
  });
  const address = server.address() as AddressInfo;
  const url = `http://${address.family === "IPv6" ? `[${address.address}]` : address.address}:${address.port}`;

  const stopWatching = watch
    ? watchConfig(
        configFile,
        () => void reload(),
        (error) => log.error({ err: error }, "config watch failed"),
        reloadDebounceMs,
        [marksFile],
      )
    : () => undefined;
  log.info({ url, config: configFile, backends: config.backends.map((backend) => backend.name) }, "router listening");

  return {
    url,
    reload,
    close: async () => {
      stopWatching();
      const closed = new Promise<void>((done) => server.close(() => done()));
      server.closeAllConnections();
      agents.http.destroy();
      agents.https.destroy();
      await closed;
    },
  };
}

function toModelObject(model: { id: string; backends: string[] }): object {
  return { id: model.id, object: "model", created: 0, owned_by: model.backends.join(",") };
}

/**
 * The body with its `model` replaced by the backend's upstream name, when it has one: the name's JSON
 * string is written over each top-level `model` value token (`spans`, from findModelField), and the
 * rest of the body is copied as sent — it is never parsed nor serialised again.
 */
function withUpstreamModel(body: Buffer, spans: ByteSpan[], upstream: string | undefined): Buffer {
  if (upstream === undefined) return body;
  const name = Buffer.from(JSON.stringify(upstream), "utf8");
  const parts: Buffer[] = [];
  let copied = 0;
  for (const [start, end] of spans) {
    parts.push(body.subarray(copied, start), name);
    copied = end;
  }
  parts.push(body.subarray(copied));
  return Buffer.concat(parts);
}

/** Characters of a requested model name shown in an error; a longer one (the body may be 32 MiB) is cut. */
const shownModelChars = 200;

/** `model` for an error message, cut to shownModelChars with its length said. */
function showModel(model: string): string {
  return model.length <= shownModelChars ? model : `${model.slice(0, shownModelChars)}… (${model.length} characters)`;
}

/**
 * A request's body, counted into `held` as it arrives; "too-large" past `maxBytes`, "busy" when
 * `held` would pass its limit, "aborted" when the client left. Only a body returned stays counted:
 * the caller gives it back when done with it.
 */
function readBody(req: IncomingMessage, maxBytes: number, held: { bytes: number; limit: number }): Promise<Buffer | "too-large" | "busy" | "aborted"> {
  return new Promise((resolve) => {
    // The chunks are joined at the end, and counted against the budget as they arrive: a declared
    // length alone holds nothing (a client that declares 32 MiB and sends nothing would otherwise
    // hold the budget for as long as the server waits for a body). Nor is a buffer of the declared
    // size made before the bytes come: a thousand clients that each declared 32 MiB reserved 32 GiB
    // of address space, and under a limit on it (ulimit -v, strict overcommit) the daemon's other
    // allocations failed.
    const length = Number(req.headers["content-length"]);
    const declared = req.headers["content-length"] !== undefined && Number.isSafeInteger(length) && length >= 0 ? length : undefined;
    if (declared !== undefined && declared > maxBytes) {
      req.resume();
      return resolve("too-large");
    }
    const chunks: Buffer[] = [];
    let size = 0;
    let settled = false;
    const settle = (outcome: Buffer | "too-large" | "busy" | "aborted"): void => {
      if (settled) return;
      settled = true;
      if (!Buffer.isBuffer(outcome)) {
        held.bytes -= size;
        chunks.length = 0;
        req.removeAllListeners("data");
        req.resume();
      }
      resolve(outcome);
    };
    req.on("data", (chunk: Buffer) => {
      if (size + chunk.length > (declared ?? maxBytes)) return settle("too-large");
      if (held.bytes + chunk.length > held.limit) return settle("busy");
      chunks.push(chunk);
      size += chunk.length;
      held.bytes += chunk.length;
    });
    req.on("end", () => {
      if (declared !== undefined && size !== declared) return settle("aborted");
      const body = Buffer.concat(chunks, size);
      chunks.length = 0;
      settle(body);
    });
    req.on("error", () => settle("aborted"));
    req.on("close", () => {
      if (!req.complete) settle("aborted");
    });
  });
}

/** Largest body parsed to tell invalid JSON from a body without `model`, bytes. */
const parseToTellBytes = 64 * 1024;

function isJson(body: Buffer): boolean {
  try {
    JSON.parse(body.toString("utf8"));
    return true;
  } catch {
    return false;
  }
}
