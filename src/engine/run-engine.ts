/**
 * Start the engine in the role the command line and cluster file give it: single process (the
 * whole model), pipeline stage, or coordinator.
 */
import type { Server } from "node:http";
import { basename, resolve } from "node:path";
import type { EngineOptions } from "./args.js";
import { computeStageRanges, readClusterConfig } from "./config/index.js";
import { BodyBudget } from "./coordinator/body-budget.js";
import { isLoopbackHost } from "./coordinator/foreign-request.js";
import { createHttpServer, type HttpContext } from "./coordinator/http-server.js";
import { LocalPipeline, type Pipeline } from "./coordinator/pipeline.js";
import { PromptEncoder } from "./coordinator/prompt-encoder.js";
import { RemotePipeline } from "./coordinator/remote-pipeline.js";
import { RequestParser } from "./coordinator/request-parser.js";
import { SequenceSlots } from "./coordinator/sequence-slots.js";
import { TextCodec } from "./coordinator/text.js";
import { generate } from "./coordinator/generate.js";
import { joinHostPort, padHeartbeatsEvery } from "./transport/index.js";
import { failureExitStatus, peerSilentExitStatus } from "./exit-status.js";
import { createLogger, type Logger } from "./log.js";
import { readModelConfig } from "./model/index.js";
import { startStage } from "./stage/worker.js";
import { readTokenFile } from "./transport/index.js";

export interface EngineHandle {
  role: "single" | "stage" | "coordinator";
  /** Resolves when the engine is serving (coordinator: all stages connected). */
  ready: Promise<void>;
  close(): Promise<void>;
  /**
   * Stop serving gracefully (the HTTP roles): new requests are answered 503 at once, those being
   * generated may finish for up to `ms`, then what is left ends with an error. Resolves once every
   * request has its answer (or `ms` and a moment more have passed).
   */
  drain?(ms: number): Promise<void>;
}

/** Default exit: flush nothing (logs are synchronous) and leave with `code`. */
function exitProcess(code: number): void {
  process.exit(code);
}

export async function runEngine(o: EngineOptions, exit: (code: number) => void = exitProcess): Promise<EngineHandle> {
  const modelDir = resolve(o.modelDir);
  const config = readModelConfig(modelDir);
  const nodeId = o.nodeId ?? "single";
  const log = createLogger(nodeId);
  const token = o.transportTokenFile === undefined ? undefined : readTokenFile(o.transportTokenFile);

  if (o.distributedConfig === undefined) {
    return startHttp(o, log, config, modelDir, "single", async (ctx) => {
      const pipeline = await LocalPipeline.load(modelDir, config, o.threads);
      ctx.pipeline = pipeline;
      log.info({ weightBytes: pipeline.weightBytes, threads: pipeline.threads }, "model loaded (single process)");
    });
  }

  const cluster = readClusterConfig(o.distributedConfig);
  padHeartbeatsEvery(o.largeHeartbeatMs);
  if (token === undefined) log.warn("no --transport-token-file: transport peers are not authenticated; use only on a trusted network segment");
  const stageIndex = cluster.stages.findIndex((s) => s.id === nodeId);
  if (stageIndex >= 0) {
    const node = cluster.stages[stageIndex]!;
    const [start, end] = computeStageRanges(cluster, config.layers)[stageIndex]!;
    const next = cluster.stages[stageIndex + 1];
    const stage = await startStage({
      modelDir,
      config,
      nodeId,
      stage: stageIndex,
      stageCount: cluster.stages.length,
      range: { start, end },
      threads: o.threads,
      host: node.host,
      port: node.port,
      next: next === undefined ? undefined : { host: next.host, port: next.port, nodeId: next.id },
      coordinatorControl: { host: cluster.coordinator.host, port: cluster.coordinator.port, nodeId: cluster.coordinator.id },
      token,
      connectTimeoutMs: o.connectTimeoutMs,
      computeStallMs: o.computeStallMs,
      log,
      exit,
    });
    return {
      role: "stage",
      ready: Promise.resolve(),
      close: async () => stage.close(),
    };
  }
  if (cluster.coordinator.id !== nodeId) {
    throw new Error(`${cluster.file}: node id "${nodeId}" is not defined (known: ${[cluster.coordinator.id, ...cluster.stages.map((s) => s.id)].join(", ")})`);
  }
  if (cluster.coordinator.host === o.host && cluster.coordinator.port === o.port) {
    throw new Error(`${cluster.file}: the coordinator's control address ${joinHostPort(o.host, o.port)} must differ from its HTTP --host:--port`);
  }
  let remote: RemotePipeline | undefined;
  const handle = await startHttp(o, log, config, modelDir, "coordinator", async (ctx) => {
    const deadline = performance.now() + o.connectTimeoutMs;
    const stages = cluster.stages.map((s) => ({ nodeId: s.id, host: s.host, port: s.port }));
    const control = { host: cluster.coordinator.host, port: cluster.coordinator.port };
    remote = await RemotePipeline.connect(stages, control, nodeId, token, deadline, log, (reason) => {
      ctx.health = { state: "broken", reason };
      log.error({ reason, exitInMs: o.brokenExitDelayMs }, "pipeline broken: a stage link was lost; health is 503 and the coordinator exits");
      setTimeout(() => exit(brokenExitStatus(remote)), o.brokenExitDelayMs).unref();
    });
    const connected = remote;
    ctx.links = () => connected.linkStates();
    ctx.pipeline = remote;
  });
  return {
    ...handle,
    close: async () => {
      remote?.close();
      await handle.close();
    },
  };
}

/**
 * Listen for HTTP at once (health answers 503 while loading), then load/connect, warm up and turn
 * healthy. A failure while loading is fatal.
 */
async function startHttp(
  o: EngineOptions,
  log: Logger,
  config: ReturnType<typeof readModelConfig>,
  modelDir: string,
  role: "single" | "coordinator",
  load: (ctx: HttpContext) => Promise<void>,
): Promise<EngineHandle> {
  // Main-thread work (a body parsed, a prompt encoded in place) holds the pipeline's links alive once
  // the pipeline is connected (below, in `load`).
  const hold = <T>(work: () => T): T => (ctx.pipeline === undefined ? work() : ctx.pipeline.hold(work));
  const ctx: HttpContext = {
    modelName: o.modelName ?? basename(modelDir),
    // Requests are admitted against the context the caches were planned for, never past the model's.
    config: { ...config, maxPositions: Math.min(config.maxPositions, o.contextLength ?? config.maxPositions) },
    codec: undefined,
    prompts: undefined,
    requests: new RequestParser(hold),
    slots: new SequenceSlots(o.maxSequences, o.maxQueued),
    clientStallMs: o.clientStallMs,
    // 16 bodies of the largest size (4 MiB), or 4096 small requests waiting, at once.
    bodies: new BodyBudget(64 * 1024 * 1024, 16 * 1024),
    loopback: isLoopbackHost(o.host),
    pipeline: undefined,
    tally: { sampled: 0, promptTokens: 0 },
    health: { state: "loading" },
    log,
  };
  const server = createHttpServer(ctx);
  await listen(server, o.host, o.port);
  log.info({ address: joinHostPort(o.host, o.port), role, model: ctx.modelName, contextLength: ctx.config.maxPositions }, "http listening");
  const ready = (async () => {
    ctx.codec = new TextCodec(modelDir);
    ctx.prompts = new PromptEncoder(ctx.codec, modelDir, hold);
    await load(ctx);
    if (!o.noWarmup) await warmUp(ctx.pipeline as Pipeline, ctx.codec, config);
    ctx.health = { state: "ok" };
    log.info("ready");
  })();
  return {
    role,
    ready,
    drain: async (ms) => {
      if (ctx.stopping !== undefined) return;
      const stopping = new AbortController();
      ctx.stopping = stopping;
      log.info({ running: ctx.slots.running, queued: ctx.slots.queued, drainMs: ms }, "stopping: new requests are refused; those under way may finish");
      // Idle keep-alive connections carry no request: closed, so no client sends another on them.
      server.closeIdleConnections();
      const busy = (): boolean => ctx.slots.running + ctx.slots.queued > 0;
      // A broken pipeline finishes nothing: what waits on it is ended at once.
      await waitWhile(busy, ctx.health.state === "broken" ? 0 : ms);
      if (busy()) log.warn({ running: ctx.slots.running, queued: ctx.slots.queued }, "stopping: requests still under way are ended with an error");
      stopping.abort(new Error("the server is shutting down"));
      // A cut request ends at its next token (a pipeline run, milliseconds): its error is written then.
      await waitWhile(busy, cutGraceMs);
    },
    close: async () => {
      await ctx.prompts?.close();
      await ctx.requests.close();
      await new Promise<void>((done) => {
        server.closeAllConnections();
        server.close(() => done());
      });
    },
  };
}

/** How long requests cut by a drain get to write their error and end, ms. */
const cutGraceMs = 1_000;

/** Wait while `condition` holds, at most `ms`, looking every 20 ms. */
async function waitWhile(condition: () => boolean, ms: number): Promise<void> {
  const deadline = performance.now() + ms;
  while (condition() && performance.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
}

/**
 * The coordinator's exit status once its pipeline broke: 69 when a stage link went silent (the
 * stages next to it exit too, and their closed links may have been seen first), else 1.
 */
function brokenExitStatus(remote: RemotePipeline | undefined): number {
  return remote?.linkStates().some((l) => l.silentMs !== undefined) === true ? peerSilentExitStatus : failureExitStatus;
}

/** Generate one token end to end, so "healthy" means the whole pipeline really computes. */
async function warmUp(pipeline: Pipeline, codec: TextCodec, config: ReturnType<typeof readModelConfig>): Promise<void> {
  await generate(
    pipeline,
    codec,
    { promptIds: [0], maxTokens: 1, params: { temperature: 0, topP: 1, seed: 0, logprobs: false, topLogprobs: 0 }, stop: [], eosIds: new Set(config.eosTokenIds) },
    () => {},
    () => false,
  );
}

function listen(server: Server, host: string, port: number): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
}
