import { mlxcelFacts } from "../mlxcel/index.js";
import type { EngineFacts, LostPeerReport, SilentPeerReport, UnreachableNextStage } from "../types.js";

/**
 * The reference engine (`shard-engine`), shipped with shardctl: a CPU pipeline-parallel Llama
 * engine, command-line compatible with mlxcel-server, so everything runs and is tested for real
 * on ordinary machines. It stands in for mlxcel: where a fact shapes what a plan or a definition
 * says, it is mlxcel's, so a definition tried with it behaves the same when switched to mlxcel.
 */
export const referenceFacts = {
  kind: "reference",
  name: "shard-engine",
  programName: "shard-engine",
  // The driver runs this installation's bundled copy unless `[engine] binary` names another.
  defaultBinary: undefined,
  // The bundled copy is this installation's own: only a binary the definition names is asked.
  versionCommand: (options) => (options.binary === undefined ? undefined : [options.binary, "--version"]),
  // Plain TypeScript on Node.js: any node.
  runsOn: undefined,
  // Its cluster TOML takes per-stage `layers = [start, end]`, which the "memory" strategy needs.
  acceptsExplicitLayers: true,
  // Given no layers it computes mlxcel's equal-layer split, whatever the layers' sizes, so an
  // "equal" plan of a dense model holds for either engine.
  ownSplit: { name: mlxcelFacts.ownSplit.name, countLayers: mlxcelFacts.ownSplit.countLayers },
  nonLayerTensors: "ends",
  // Its model code is the Llama path: Mistral loads through it, Qwen2's attention biases do not.
  modelFamilies: mlxcelFacts.modelFamilies,
  // Its own loader's limits, not mlxcel's, from src/engine/model/: tensors.ts widens F32, F16
  // and BF16 only, and its kernels unpack 4- or 8-bit affine groups of 32 or 16 values at a time;
  // model-shard.ts reads every module with the default group size; model-config.ts reads the top
  // level of config.json, requires intermediate_size and implements Llama 3's rope_scaling only.
  modelFormat: {
    floatDtypes: ["F32", "F16", "BF16"],
    quantization: {
      bits: [
        { bits: 4, groupSizeMultiple: 32 },
        { bits: 8, groupSizeMultiple: 16 },
      ],
      modes: ["affine"],
      perModuleGroupSize: false,
    },
    requiredConfigFields: ["intermediate_size"],
    ropeScalingTypes: ["llama3"],
    topLevelOnly: true,
  },
  // Peers prove they hold the per-launch token (challenge-response over HMAC-SHA256).
  authenticatesTransport: true,
  // Its command line is mlxcel's, and so are the flags a definition may not pass.
  // mlxcel's rules, and the flags its driver adds for shard-engine: the per-launch transport
  // token (a definition must not point a stage at another file), the served name, the threads
  // each stage gets of its machine's cores, and the sequences its KV caches are planned for
  // (`max_sequences`: more at once would outgrow the plan).
  // Its parser is strict, and its flags are these (src/engine/args.ts; a test holds the two
  // lists equal): an unknown one is said at validate, not found by a crash loop at launch. --help
  // and --version print and exit, so a stage given one would never serve.
  extraArgs: {
    refused: {
      ...mlxcelFacts.extraArgs.refused,
      "--help": "shard-engine prints its usage and exits: no process would serve",
      "--version": "shard-engine prints its version and exits: no process would serve",
      "-h": "shard-engine prints its usage and exits: no process would serve",
      "-V": "shard-engine prints its version and exits: no process would serve",
    },
    setByDriver: [...mlxcelFacts.extraArgs.setByDriver, "--transport-token-file", "--model-name", "--threads", "--max-sequences", "--context-length"],
    flags: [
      ...["-m", "--model", "--distributed-config", "--node-id", "--host", "--port", "--transport-token-file", "--model-name"],
      ...["--threads", "--max-sequences", "--max-queued", "--context-length", "--no-warmup", "--connect-timeout-ms", "--broken-exit-delay-ms"],
      ...["--compute-stall-ms", "--large-heartbeat-ms", "--client-stall-ms", "--drain-ms", "--version", "-V", "--help", "-h"],
    ],
    // Its parser's bounds (a test holds them equal), ms unless said.
    integers: {
      "--port": [0, 65_535],
      "--connect-timeout-ms": [1, 86_400_000],
      "--broken-exit-delay-ms": [0, 600_000],
      "--compute-stall-ms": [100, 86_400_000],
      "--large-heartbeat-ms": [0, 86_400_000],
      "--client-stall-ms": [100, 86_400_000],
      "--drain-ms": [0, 86_400_000],
      "--threads": [1, 1024],
      "--max-sequences": [1, 4096],
      "--max-queued": [0, 1_000_000],
      "--context-length": [1, 2 ** 31 - 1],
    },
  },
  // mlxcel's advice, in its own name: each stage is a hop per token for shard-engine too.
  stageCount: {
    ...mlxcelFacts.stageCount,
    advice: "shard-engine, like mlxcel, is validated best on two-stage topologies; each extra stage adds a network hop per token",
  },
  memoryHeadroom: mlxcelFacts.memoryHeadroom,
  // Launch gives each of k stages on one machine ⌊cores ÷ k⌋ threads (shard-engine --threads;
  // alone, a stage takes every core).
  sharedMachineCores: "shard-engine gives each of them its machine's cores ÷ the stages it runs (--threads, at least 1), so together they use every core once",
  // Its /health answers 503 while loading (and while a broken pipeline winds down) and 200 once
  // every stage is connected and warmed up; a lost stage link makes the coordinator exit.
  readiness: {
    healthPath: "/health",
    readyStatus: 200,
    loadingStatus: 503,
    brokenIn: brokenPipelineIn,
    // Each link carries heartbeats; a lost one is answered 503 pipeline_broken within 3 s.
    healthCoversLinks: true,
    progressIn: workDoneIn,
    completionsPath: "/v1/completions",
    stageUp: "transport-listening",
    httpServer: "coordinator",
    processExit: "ends-pipeline",
  },
  silentPeerIn,
  answeringPeersIn,
  lostPeerIn,
  nextStageUnreachableIn,
} as const satisfies EngineFacts;

/**
 * The lines of `logTail` that are shard-engine's JSON log entries with `msg`, parsed, last first.
 * A line cut short (the tail's first), not JSON or not the engine's own is passed over.
 */
function entriesWith(logTail: readonly string[], msg: string): Array<Record<string, unknown>> {
  return [...logTail].reverse().flatMap((line) => {
    if (!line.includes(msg)) return [];
    try {
      const entry = JSON.parse(line) as Record<string, unknown>;
      return entry.msg === msg ? [entry] : [];
    } catch {
      return [];
    }
  });
}

/**
 * shard-engine's "peer silent" line (src/engine/exit-status.ts): a process that declares a peer dead
 * for silence logs it, with the peer's node id, just before it exits with status 69 (a stage) or as
 * the link dies (the coordinator, which answers /health 503 a while before it exits). The last such
 * line of the tail counts; any other line, or one that is not JSON, names nobody.
 */
function silentPeerIn(logTail: readonly string[]): SilentPeerReport | undefined {
  for (const entry of entriesWith(logTail, peerSilentLog)) {
    if (typeof entry.peer !== "string" || typeof entry.silentMs !== "number") continue;
    return { peer: entry.peer, link: typeof entry.link === "string" ? entry.link : "peer", silentMs: entry.silentMs };
  }
  return undefined;
}

/** The `msg` of shard-engine's line naming a silent peer (src/engine/exit-status.ts, which cannot be imported from here). */
const peerSilentLog = "peer silent";

/**
 * shard-engine's "peer answering" lines (src/engine/exit-status.ts): the peers a process still heard
 * from, within half the liveness bound, as its pipeline broke. Any other line names nobody.
 */
function answeringPeersIn(logTail: readonly string[]): string[] {
  return entriesWith(logTail, peerAnsweringLog).flatMap((entry) => (typeof entry.peer === "string" ? [entry.peer] : []));
}

/** The `msg` of shard-engine's line naming a peer still heard from as the pipeline broke (src/engine/exit-status.ts). */
const peerAnsweringLog = "peer answering";

/**
 * shard-engine's "peer lost" line (src/engine/exit-status.ts): a stage whose link closed logs it,
 * naming the peer by its node id, just before it exits with status 1; the coordinator as its
 * pipeline breaks. The last such line of the tail counts; any other line names nobody.
 */
function lostPeerIn(logTail: readonly string[]): LostPeerReport | undefined {
  for (const entry of entriesWith(logTail, peerLostLog)) {
    if (typeof entry.peer !== "string") continue;
    return { peer: entry.peer, link: typeof entry.link === "string" ? entry.link : "peer", reason: typeof entry.reason === "string" ? entry.reason : "closed" };
  }
  return undefined;
}

/** The `msg` of shard-engine's line naming the peer whose link closed (src/engine/exit-status.ts). */
const peerLostLog = "peer lost";

/**
 * shard-engine's line when a stage could not dial its next stage within its connect timeout
 * (src/engine/stage/worker.ts): `next` (host, port, node id) and `err`. The last stage's next hop
 * is the coordinator's control address, named the same way. The last such line counts.
 */
function nextStageUnreachableIn(logTail: readonly string[]): UnreachableNextStage | undefined {
  for (const entry of entriesWith(logTail, nextStageUnreachableLog)) {
    const next = entry.next as { host?: unknown; port?: unknown; nodeId?: unknown } | undefined;
    if (typeof next?.nodeId !== "string" || typeof next.host !== "string" || typeof next.port !== "number") continue;
    // host:port with an IPv6 host in brackets (the engines' layer takes nothing from src/nodes, which depends on it).
    return {
      peer: next.nodeId,
      address: next.host.includes(":") ? `[${next.host}]:${next.port}` : `${next.host}:${next.port}`,
      error: typeof entry.err === "string" ? entry.err : "no reason given",
    };
  }
  return undefined;
}

/** The `msg` of shard-engine's line when a stage cannot reach the next one (src/engine/stage/worker.ts). */
const nextStageUnreachableLog = "cannot reach the next stage";

/**
 * What a 503 from the coordinator's /health says when its pipeline is broken: its message
 * ("Stage link(s) dead: stage-0", "Pipeline broken: …"). Anything else is loading.
 */
function brokenPipelineIn(body: string): string | undefined {
  let message: unknown;
  try {
    message = (JSON.parse(body) as { error?: { message?: unknown } } | null)?.error?.message;
  } catch {
    return undefined;
  }
  return typeof message === "string" && brokenMessage.test(message) ? message : undefined;
}

/** The tokens generated since start that the coordinator's /health 200 gives (`generatedTokens`). */
/**
 * The work shard-engine's /health says its pipeline has done: tokens sampled plus prompt tokens
 * processed (src/engine/coordinator/token-tally.ts). A long prompt moves the second chunk by chunk
 * while nothing is sampled.
 */
function workDoneIn(body: string): number | undefined {
  try {
    const answer = JSON.parse(body) as { generatedTokens?: unknown; promptTokens?: unknown } | null;
    const count = (value: unknown): number | undefined => (typeof value === "number" && Number.isSafeInteger(value) && value >= 0 ? value : undefined);
    const generated = count(answer?.generatedTokens);
    return generated === undefined ? undefined : generated + (count(answer?.promptTokens) ?? 0);
  } catch {
    return undefined;
  }
}

/**
 * How the coordinator's 503 says its pipeline is broken (src/engine/coordinator/http-server.ts);
 * any other 503 ("Loading model") is loading, as for an engine that says nothing more.
 */
const brokenMessage = /^(Pipeline broken|Stage link\(s\) dead): /;
