/**
 * The coordinator's OpenAI-compatible HTTP listener (node:http): /health, /v1/models,
 * /v1/chat/completions, /v1/completions (streaming and not), /debug/stats. Every malformed request
 * gets an OpenAI-style error body and the server keeps serving.
 */
import { randomBytes } from "node:crypto";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { limitConnections, limitedServerOptions } from "./connection-limits.js";
import type { Logger } from "../log.js";
import type { BodyBudget, BodyShare } from "./body-budget.js";
import { refuseForeignRequest } from "./foreign-request.js";
import type { ModelConfig } from "../model/index.js";
import { generate, type TokenInfo } from "./generate.js";
import type { TokenTally } from "./token-tally.js";
import type { Pipeline } from "./pipeline.js";
import { type PromptEncoder, TokenizerThreadFailed } from "./prompt-encoder.js";
import { QueueFull, type SequenceSlots } from "./sequence-slots.js";
import { type LinkState, PipelineBroken } from "./remote-pipeline.js";
import { ApiError, type ChatRequest, type CompletionRequest } from "./requests.js";
import type { RequestParser } from "./request-parser.js";
import type { TextCodec } from "./text.js";

/** Largest request body accepted, bytes. */
export const maxBodyBytes = 4 * 1024 * 1024;
/** Bytes of an oversized body read (and discarded) before the connection is cut. */
const maxDrainBytes = 64 * 1024 * 1024;
/** Longest a request's head and body may take to arrive, ms (node's default is 300 s). */
const requestTimeoutMs = 60_000;
/** max_tokens when the request gives none. */
const defaultMaxTokens = 256;

export type HealthState = { state: "loading" } | { state: "ok" } | { state: "broken"; reason: string };

export interface HttpContext {
  modelName: string;
  config: ModelConfig;
  codec: TextCodec | undefined;
  /** Tokenizes long prompts off the event loop (set with `codec`). */
  prompts: PromptEncoder | undefined;
  /** Parses request bodies, large ones off the event loop. */
  requests: RequestParser;
  /** Admission: the sequences generated at once. */
  slots: SequenceSlots;
  /** How long a stream may stay backed up (its client reading nothing) before it is given up, ms. */
  clientStallMs: number;
  /** The memory request bodies may hold, all together, until their requests take a slot. */
  bodies: BodyBudget;
  /** The server is bound to a loopback address: it serves loopback Host names only. */
  loopback: boolean;
  pipeline: Pipeline | undefined;
  /**
   * Tokens generated since start, in /health's answer: a watchdog whose one-token completion waits
   * behind busy slots sees the count grow (a busy pipeline), where a hung one's stands still.
   */
  tally: TokenTally;
  health: HealthState;
  /**
   * Set once the process is asked to stop (SIGTERM): new requests are answered 503, and once it
   * aborts (the drain time is over), the requests still generating or waiting for a slot end with
   * shuttingDown().
   */
  stopping?: AbortController;
  /** The stage links' states (remote pipelines only); /health is 200 only while every one is up. */
  links?: () => LinkState[];
  log: Logger;
}

const routes: Record<string, string> = {
  "/health": "GET",
  "/v1/models": "GET",
  "/v1/chat/completions": "POST",
  "/v1/completions": "POST",
  "/debug/stats": "GET",
};

export function createHttpServer(ctx: HttpContext): Server {
  const server = createServer(limitedServerOptions(requestTimeoutMs), (req, res) => {
    handle(ctx, req, res).catch((error: unknown) => {
      const e = toApiError(error);
      if (!(error instanceof ApiError)) ctx.log.error({ err: (error as Error).message, url: req.url }, "request failed");
      if (!res.headersSent) sendJson(res, e.status, e.body(), e.headers);
      else if (!res.writableEnded) {
        res.write(`data: ${JSON.stringify(e.body())}\n\n`);
        res.end();
      }
    });
  });
  server.keepAliveTimeout = 5000;
  limitConnections(server, ctx.log);
  return server;
}

function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/**
 * A lost stage link is the service being unavailable (503, with Retry-After: a supervised cluster is
 * relaunched within seconds), anything else a server error. Both in OpenAI's error shape, of its
 * type `server_error`, which clients retry.
 */
function toApiError(error: unknown): ApiError {
  if (error instanceof ApiError) return error;
  if (error instanceof PipelineBroken) return pipelineBroken(error.message);
  return new ApiError(500, (error as Error).message, null, null, "server_error");
}

function pipelineBroken(reason: string): ApiError {
  return new ApiError(503, `Pipeline broken: ${reason}`, null, "pipeline_broken", "server_error", { "retry-after": "2" });
}

/** The answer of a request the process will not (or no longer) generate for: it is stopping. */
export function shuttingDown(): ApiError {
  return new ApiError(
    503,
    "The server is shutting down (its cluster is being stopped or replaced); retry in a few seconds",
    null,
    "server_shutting_down",
    "server_error",
    { "retry-after": "2" },
  );
}

/** A completion asked of a process that cannot generate: its pipeline broke, or the model still loads. */
function unavailable(ctx: HttpContext): ApiError {
  if (ctx.health.state === "broken") return pipelineBroken(ctx.health.reason);
  return new ApiError(503, "Loading model", null, "model_loading", "server_error", { "retry-after": "2" });
}

async function handle(ctx: HttpContext, req: IncomingMessage, res: ServerResponse): Promise<void> {
  const refusal = refuseForeignRequest(req, ctx.loopback);
  if (refusal !== undefined) {
    req.resume();
    throw new ApiError(403, refusal, null, "forbidden");
  }
  const path = (req.url ?? "/").split("?")[0] as string;
  const method = routes[path];
  if (method === undefined) throw new ApiError(404, `Unknown route ${req.method} ${path}`, null, "not_found");
  if (req.method !== method) {
    res.setHeader("allow", method);
    throw new ApiError(405, `Method ${req.method} is not allowed on ${path}; use ${method}`, null, "method_not_allowed");
  }
  if (path === "/health" && ctx.stopping !== undefined) {
    sendJson(res, 503, { error: { code: 503, message: "shutting down", type: "unavailable" }, status: "stopping" });
    return;
  }
  if (path === "/health") {
    const links = ctx.links?.();
    const dead = (links ?? []).filter((l) => l.state !== "up");
    if (ctx.health.state === "ok" && dead.length === 0) sendJson(res, 200, { status: "ok", generatedTokens: ctx.tally.sampled, promptTokens: ctx.tally.promptTokens });
    else {
      const message = dead.length > 0 && ctx.health.state !== "broken" ? `Stage link(s) dead: ${dead.map((l) => l.nodeId).join(", ")}` : unavailable(ctx).message;
      sendJson(res, 503, { error: { code: 503, message, type: "unavailable" }, ...(links === undefined ? {} : { links, deadLinks: dead.map((l) => l.nodeId) }) });
    }
    return;
  }
  if (path === "/v1/models") {
    sendJson(res, 200, { object: "list", data: [{ id: ctx.modelName, object: "model", created: 0, owned_by: "shard-engine" }] });
    return;
  }
  if (ctx.stopping !== undefined && path !== "/debug/stats") {
    req.resume();
    res.setHeader("connection", "close");
    throw shuttingDown();
  }
  if (ctx.health.state !== "ok" || ctx.pipeline === undefined || ctx.codec === undefined || ctx.prompts === undefined) throw unavailable(ctx);
  if (path === "/debug/stats") {
    const requests = { running: ctx.slots.running, queued: ctx.slots.queued, maxSequences: ctx.slots.limit, maxQueued: ctx.slots.queueLimit };
    sendJson(res, 200, { requests, stages: await ctx.pipeline.stats() });
    return;
  }
  // Held until the request takes a slot (complete() gives it back then), or here when it fails first.
  const share = ctx.bodies.open();
  try {
    const body = await readBody(req, share);
    const request = await ctx.requests.parse(body, path === "/v1/chat/completions" ? "chat" : "completion");
    if (request.model !== undefined && request.model !== ctx.modelName) {
      throw new ApiError(404, `The model \`${request.model}\` does not exist; this server serves \`${ctx.modelName}\``, "model", "model_not_found");
    }
    await complete(ctx, ctx.pipeline, ctx.codec, ctx.prompts, request, req, res, share);
  } finally {
    share.release();
  }
}

/**
 * Read the body (at most maxBodyBytes) into `share`. A larger one is refused with 413, read to its
 * end and dropped (or cut past maxDrainBytes). One the budget has no room for is refused with 503:
 * at once when its declared length does not fit (node drops what the client still sends), else
 * once it ends, its bytes dropped as they came.
 */
async function readBody(req: IncomingMessage, share: BodyShare): Promise<Buffer> {
  const declared = Number(req.headers["content-length"] ?? 0);
  // Room for the whole declared body up front: a client that stalls holds no more than it declared.
  if (declared <= maxBodyBytes && !share.growTo(declared)) throw busy(share);
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size <= maxBodyBytes && share.growTo(size)) chunks.push(chunk);
    else if (size > maxDrainBytes) {
      req.destroy();
      break;
    } else chunks.length = 0;
  }
  if (size > maxBodyBytes || declared > maxBodyBytes) {
    throw new ApiError(413, `Request body of ${Math.max(size, declared)} bytes exceeds the limit of ${maxBodyBytes} bytes`, null, "request_too_large");
  }
  if (!share.fits) throw busy(share);
  return Buffer.concat(chunks);
}

function busy(share: BodyShare): ApiError {
  const mib = Math.round(share.limitBytes / 1048576);
  return new ApiError(
    503,
    `The server is busy: requests being read or waiting for a slot hold the ${mib} MiB it gives them; retry shortly`,
    null,
    "server_busy",
    "unavailable",
    {
      "retry-after": "1",
    },
  );
}

/**
 * 429 with Retry-After, as an overloaded OpenAI-compatible server answers (OpenAI clients back off
 * and retry it; routers take it as load, not as a failed backend).
 */
function queueFull(full: QueueFull): ApiError {
  return new ApiError(429, `The server is overloaded: ${full.message} (shard-engine --max-queued); retry shortly`, null, "queue_full", "unavailable", {
    "retry-after": "1",
  });
}

async function complete(
  ctx: HttpContext,
  pipeline: Pipeline,
  codec: TextCodec,
  prompts: PromptEncoder,
  request: ChatRequest | CompletionRequest,
  req: IncomingMessage,
  res: ServerResponse,
  share: BodyShare,
): Promise<void> {
  // Watched from the start: a client that leaves while its prompt is tokenized (on the tokenizer
  // thread, for long ones) or while it waits for a slot is never generated for.
  let closed = false;
  const gone = new AbortController();
  res.on("close", () => {
    if (res.writableFinished) return;
    closed = true;
    gone.abort(new Error("client disconnected"));
  });
  const promptParam = request.kind === "chat" ? "messages" : "prompt";
  // Text that cannot fit the context whatever it tokenizes to is refused before it is tokenized.
  const chars = request.kind === "chat" ? request.messages.reduce((sum, m) => sum + m.content.length, 0) : typeof request.prompt === "string" ? request.prompt.length : 0;
  const fits = ctx.config.maxPositions * codec.longestTokenChars;
  if (request.kind === "chat" && request.messages.length > ctx.config.maxPositions) {
    throw new ApiError(
      400,
      `The prompt has ${request.messages.length} messages, more than the context has tokens (${ctx.config.maxPositions}): the chat template gives each message tokens of its own`,
      promptParam,
      "context_length_exceeded",
    );
  }
  if (chars > fits) {
    throw new ApiError(
      400,
      `The prompt (${chars} characters) cannot fit the context of ${ctx.config.maxPositions} tokens: a token of this model covers at most ${codec.longestTokenChars} characters`,
      promptParam,
      "context_length_exceeded",
    );
  }
  // Tokenize.
  let promptIds: number[];
  let promptText = "";
  try {
    if (request.kind === "chat") promptIds = await prompts.encodeChat(request.messages);
    else if (typeof request.prompt === "string") {
      promptText = request.prompt;
      promptIds = await prompts.encode(request.prompt);
    } else promptIds = request.prompt;
  } catch (error) {
    if (error instanceof TokenizerThreadFailed) {
      ctx.log.error({ err: error.message }, "the tokenizer thread failed; the next long prompt starts a new one");
      throw new ApiError(500, `Cannot tokenize the prompt: ${error.message}`, null, "tokenizer_failed", "server_error");
    }
    throw new ApiError(400, `Cannot build the prompt: ${(error as Error).message}`, promptParam);
  }
  if (promptIds.length === 0) throw new ApiError(400, "The prompt is empty", promptParam);
  if (promptIds.some((t) => t >= ctx.config.vocabSize)) throw new ApiError(400, "The prompt has token ids outside the vocabulary", "prompt");
  const room = ctx.config.maxPositions - promptIds.length;
  if (room < 1)
    throw new ApiError(
      400,
      `The prompt (${promptIds.length} tokens) leaves no room in the context of ${ctx.config.maxPositions} tokens`,
      promptParam,
      "context_length_exceeded",
    );
  const maxTokens = Math.min(request.maxTokens ?? defaultMaxTokens, room);
  const topLogprobs = request.kind === "chat" ? (request.logprobs ? request.topLogprobs : 0) : (request.logprobs ?? 0);
  const wantLogprobs = request.kind === "chat" ? request.logprobs : request.logprobs !== undefined;
  const params = {
    temperature: request.temperature,
    topP: request.topP,
    seed: request.seed === undefined ? randomBytes(4).readUInt32LE(0) : request.seed >>> 0,
    logprobs: wantLogprobs,
    topLogprobs,
  };

  const id = `${request.kind === "chat" ? "chatcmpl" : "cmpl"}-${randomBytes(12).toString("hex")}`;
  const created = Math.floor(Date.now() / 1000);
  const object = request.kind === "chat" ? "chat.completion" : "text_completion";
  // A stopping process cuts what it still generates once its drain time is over (see drain()).
  const cut = (): boolean => ctx.stopping?.signal.aborted === true;
  const cancelled = (): boolean => closed || cut();
  // Wait for a slot: a client that leaves meanwhile is never computed for.
  let release: () => void;
  try {
    release = await ctx.slots.acquire(ctx.stopping === undefined ? gone.signal : AbortSignal.any([gone.signal, ctx.stopping.signal]));
    // Generating now: what the request holds is the pipeline's (its KV cache), not the queue's.
    share.release();
  } catch (error) {
    if (error instanceof QueueFull) throw queueFull(error);
    if (!closed && cut()) throw shuttingDown();
    ctx.log.info({ id, queued: ctx.slots.queued }, "client disconnected while waiting for a slot");
    return;
  }
  try {
    // The pipeline may have broken while the request waited: answered as one that came then.
    if (ctx.health.state !== "ok") throw unavailable(ctx);
    await respond();
  } finally {
    release();
  }

  async function respond(): Promise<void> {
    const options = { promptIds, maxTokens, params, stop: request.stop, eosIds: new Set(ctx.config.eosTokenIds), tally: ctx.tally };
    const usage = (completion: number): object => ({ prompt_tokens: promptIds.length, completion_tokens: completion, total_tokens: promptIds.length + completion });
    const logprobsOf = (tokens: TokenInfo[]): object | null => {
      if (!wantLogprobs) return null;
      return request.kind === "chat" ? chatLogprobs(codec, tokens) : completionLogprobs(codec, tokens, promptText.length);
    };

    const startedAt = performance.now();
    const logDone = (completionTokens: number, finishReason: string): void =>
      ctx.log.info(
        { id, promptTokens: promptIds.length, completionTokens, finishReason, stream: request.stream, ms: Math.round(performance.now() - startedAt) },
        "request done",
      );

    if (!request.stream) {
      const infos: TokenInfo[] = [];
      let result: Awaited<ReturnType<typeof generate>>;
      try {
        result = await generate(
          pipeline,
          codec,
          options,
          (_text, tokens) => {
            infos.push(...tokens);
          },
          cancelled,
        );
      } catch (error) {
        if (!closed && cut()) throw shuttingDown();
        if (!closed) throw error;
        ctx.log.info({ id }, "client disconnected; sequence cancelled");
        return;
      }
      logDone(result.completionTokens, result.finishReason);
      const choice =
        request.kind === "chat"
          ? { index: 0, message: { role: "assistant", content: result.text }, logprobs: logprobsOf(infos), finish_reason: result.finishReason }
          : { index: 0, text: result.text, logprobs: logprobsOf(infos), finish_reason: result.finishReason };
      sendJson(res, 200, { id, object, created, model: ctx.modelName, choices: [choice], usage: usage(result.completionTokens) });
      return;
    }

    // The stream's head waits for the first token: a pipeline that breaks before it (a stage lost
    // while the request waited or while its prompt was processed) is then answered 503 with
    // Retry-After, which clients retry, and not a 200 whose stream holds only an error.
    const chunkObject = request.kind === "chat" ? "chat.completion.chunk" : "text_completion";
    let opened = false;
    let sent = 0;
    // A chunk the socket could not take whole waits, with the next token's run, until the client
    // reads: a client that reads slowly slows its own generation instead of this process buffering
    // its whole completion, and one that reads nothing is let go (see untilDrained).
    const send = (choices: object[], extra: object = {}): Promise<void> | undefined => {
      if (closed) return undefined;
      if (!opened) open();
      sent++;
      const flushed = res.write(`data: ${JSON.stringify({ id, object: chunkObject, created, model: ctx.modelName, choices, ...extra })}\n\n`);
      return flushed
        ? undefined
        : untilDrained(res, ctx.clientStallMs, () =>
            ctx.log.warn({ id, chunksWritten: sent, stalledMs: ctx.clientStallMs }, "the client read nothing of its stream for too long; disconnected"),
          );
    };
    // The head, and a chat's role chunk written with it (the chunk that follows waits for the drain).
    const open = (): void => {
      opened = true;
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache", connection: "keep-alive" });
      if (request.kind !== "chat") return;
      sent++;
      const role = [{ index: 0, delta: { role: "assistant", content: "" }, logprobs: null, finish_reason: null }];
      res.write(`data: ${JSON.stringify({ id, object: chunkObject, created, model: ctx.modelName, choices: role })}\n\n`);
    };
    try {
      const result = await generate(
        pipeline,
        codec,
        options,
        (text, tokens) =>
          request.kind === "chat"
            ? send([{ index: 0, delta: { content: text }, logprobs: logprobsOf(tokens), finish_reason: null }])
            : send([{ index: 0, text, logprobs: logprobsOf(tokens), finish_reason: null }]),
        cancelled,
      );
      if (request.kind === "chat") await send([{ index: 0, delta: {}, logprobs: null, finish_reason: result.finishReason }]);
      else await send([{ index: 0, text: "", logprobs: null, finish_reason: result.finishReason }]);
      if (request.includeUsage) await send([], { usage: usage(result.completionTokens) });
      logDone(result.completionTokens, result.finishReason);
      if (!closed) res.end("data: [DONE]\n\n");
    } catch (error) {
      if (closed) {
        ctx.log.info({ id }, "client disconnected; sequence cancelled");
        return;
      }
      throw cut() ? shuttingDown() : toApiError(error);
    }
  }
}

/**
 * Wait until `res` has handed what it holds to the kernel ('drain') or is closed. One still backed
 * up after `stallMs` (its client reads nothing while the socket's buffers are full) is destroyed:
 * its request ends as a disconnected client's does and its slot is freed. `onStall` logs why.
 */
function untilDrained(res: ServerResponse, stallMs: number, onStall: () => void): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      res.off("drain", done);
      res.off("close", done);
      resolve();
    };
    const timer = setTimeout(() => {
      onStall();
      res.destroy();
      done();
    }, stallMs);
    res.once("drain", done);
    res.once("close", done);
  });
}

function chatLogprobs(codec: TextCodec, tokens: TokenInfo[]): object {
  const entry = (token: number, logprob: number): { token: string; logprob: number; bytes: number[] } => {
    const text = codec.tokenString(token);
    return { token: text, logprob, bytes: [...Buffer.from(text, "utf8")] };
  };
  return {
    content: tokens.map((t) => ({ ...entry(t.sampled.token, t.sampled.logprob), top_logprobs: t.sampled.top.map((a) => entry(a.token, a.logprob)) })),
  };
}

function completionLogprobs(codec: TextCodec, tokens: TokenInfo[], promptChars: number): object {
  return {
    tokens: tokens.map((t) => codec.tokenString(t.sampled.token)),
    token_logprobs: tokens.map((t) => t.sampled.logprob),
    top_logprobs: tokens.map((t) => Object.fromEntries(t.sampled.top.map((a) => [codec.tokenString(a.token), a.logprob]))),
    text_offset: tokens.map((t) => promptChars + t.offset),
  };
}
