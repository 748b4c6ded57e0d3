/** Command line of shard-engine, compatible with mlxcel-server for the flags the launcher uses. */
import { availableParallelism } from "node:os";
import { parseArgs } from "node:util";

/**
 * shard-engine's version, which `--version` prints and the planner compares across a cluster's
 * nodes (MixedEngineVersions). Raised with every change of the transport's frames: 0.2.0 reads the
 * fill-only bit of runs and activations (a long prompt in chunks), which 0.1.0 takes for a
 * malformed frame; 0.3.0's prepare carries whether the log probabilities are wanted (26 bytes, which
 * 0.2.0 refuses).
 */
export const engineVersion = "0.3.0";

export interface EngineOptions {
  modelDir: string;
  distributedConfig: string | undefined;
  nodeId: string | undefined;
  /** HTTP host of the coordinator / single process. Default 127.0.0.1. */
  host: string;
  /** HTTP port. Default 8080. */
  port: number;
  /** Skip the one-token generation before reporting healthy. Default false. */
  noWarmup: boolean;
  transportTokenFile: string | undefined;
  /** Served model name. Default: basename of the model directory. */
  modelName: string | undefined;
  /** How long the coordinator (and each stage, for its next stage) keeps dialing, ms. Default 60000. */
  connectTimeoutMs: number;
  /** How long a coordinator with a broken pipeline keeps answering 503 before exiting, ms. Default 2000. */
  brokenExitDelayMs: number;
  /**
   * How long a stage's computation may go without finishing a layer before the stage stops
   * heartbeating its links (its peers then declare it dead), ms. Default 30000.
   */
  computeStallMs: number;
  /**
   * How long an idle pipeline link may go without sending a 16 KiB frame before it pads a
   * heartbeat to that size, so that a path passing only small packets (a path-MTU black hole) is
   * found while the cluster idles, ms; 0: never. Default 30000.
   */
  largeHeartbeatMs: number;
  /**
   * Threads computing each product of this process's layers. Default: the machine's cores
   * (os.availableParallelism()); with two stages on one machine, give each its share.
   */
  threads: number;
  /** Sequences the coordinator generates at once; later requests wait for a slot. Default 16. */
  maxSequences: number;
  /** Requests that may wait for a generation slot; one more is refused (429). */
  maxQueued: number;
  /**
   * The most tokens one request may hold, prompt and completion together: what the KV caches were
   * planned for. Undefined: the model's max_position_embeddings (a larger value is cut to it).
   */
  contextLength: number | undefined;
  /**
   * How long a streaming client may leave its response unread, once what it has not read fills the
   * socket's buffers, before its request is given up (its slot freed), ms. Default 60000.
   */
  clientStallMs: number;
  /**
   * On SIGTERM, how long the coordinator (or single process) lets the requests it is generating
   * finish, answering new ones 503, before it ends those left with an error and exits, ms. Default
   * 3000: within the 5 s a teardown gives a process before SIGKILL.
   */
  drainMs: number;
}

export type ParsedArgs = { kind: "run"; options: EngineOptions } | { kind: "help" } | { kind: "version" };

/** A bad command line; the CLI prints the message and exits 1. */
export class EngineUsageError extends Error {
  override readonly name = "EngineUsageError";
}

export const usage = `usage: shard-engine -m <model-dir> [--distributed-config <cluster.toml> --node-id <id>]
                    [--host <ip>] [--port <port>] [--no-warmup] [--transport-token-file <file>]
                    [--model-name <name>] [--connect-timeout-ms <ms>] [--broken-exit-delay-ms <ms>]
                    [--threads <n>] [--max-sequences <n>] [--max-queued <n>] [--context-length <tokens>]
                    [--compute-stall-ms <ms>] [--large-heartbeat-ms <ms>] [--client-stall-ms <ms>]
                    [--drain-ms <ms>]
       shard-engine --version | --help

Without --distributed-config one process serves the whole model. With it, the node named by
--node-id becomes a pipeline stage (binds its TOML address) or, for the hybrid node, the
coordinator (HTTP on --host:--port). --threads (default: this machine's cores) is how many threads
compute each matrix product of the layers this process holds. --max-sequences (default 16) is how
many requests the coordinator generates at once; later ones wait their turn, at most --max-queued
of them (default 8 × --max-sequences; one more is answered 429 with Retry-After). --context-length
(default: the model's max_position_embeddings, never more) is the most tokens one request may hold,
prompt and completion together; a longer prompt is refused (--host defaults to 127.0.0.1, --port to
8080). --model-name (default: the model folder's name) is the id /v1/models lists and requests
name. --transport-token-file names a file holding the secret every pipeline link proves it knows
(none by default: links are not authenticated). Before /health answers 200 the HTTP process
generates one token end to end, unless --no-warmup. A stage or coordinator dials its pipeline
peers for up to --connect-timeout-ms (default 60000) before it gives up; once a stage link is lost,
the coordinator answers /health 503 for --broken-exit-delay-ms (default 2000), then exits. A stage
whose computation finishes no layer for --compute-stall-ms (default 30000) stops heartbeating its
links, so its peers declare it dead as a stopped one. An idle pipeline link pads one heartbeat to
16 KiB when it has sent nothing that large for --large-heartbeat-ms (default 30000; 0: never): a
path that passes only small packets (a path-MTU black hole) then silences the link, and its peers
declare it dead while the cluster idles rather than at its first request.
A stream's generation waits while its client reads nothing and the socket's buffers are full; a
client that stays so for --client-stall-ms (default 60000) is disconnected and its slot freed.
On SIGTERM the coordinator (or single process) answers new requests 503 and lets those it is
generating finish for --drain-ms (default 3000); a stream still running then ends with an error
event ("server_shutting_down"), and the process ends by the signal.

Exit status: 69 when a pipeline peer stopped answering (nothing on its link for 2500 ms; the last
log line, "peer silent", names it by node id: the peer itself may still run), 1 on any other
failure (a lost link, a bad command line or file).`;

function integer(name: string, value: string | undefined, fallback: number, min: number, max: number): number {
  if (value === undefined) return fallback;
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > max) throw new EngineUsageError(`Expected \`--${name}\` to be an integer between ${min} and ${max}, got \`${value}\``);
  return n;
}

/** Every flag shard-engine reads (node:util parseArgs, strict: any other stops it at once). */
export const engineFlags = {
  model: { type: "string", short: "m" },
  "distributed-config": { type: "string" },
  "node-id": { type: "string" },
  host: { type: "string" },
  port: { type: "string" },
  "no-warmup": { type: "boolean" },
  "transport-token-file": { type: "string" },
  "model-name": { type: "string" },
  "connect-timeout-ms": { type: "string" },
  "broken-exit-delay-ms": { type: "string" },
  "compute-stall-ms": { type: "string" },
  "large-heartbeat-ms": { type: "string" },
  "client-stall-ms": { type: "string" },
  "drain-ms": { type: "string" },
  threads: { type: "string" },
  "max-sequences": { type: "string" },
  "max-queued": { type: "string" },
  "context-length": { type: "string" },
  version: { type: "boolean", short: "V" },
  help: { type: "boolean", short: "h" },
} as const;

export function parseEngineArgs(argv: string[]): ParsedArgs {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv,
      strict: true,
      allowPositionals: false,
      options: engineFlags,
    }));
  } catch (error) {
    throw new EngineUsageError((error as Error).message);
  }
  if (values.help === true) return { kind: "help" };
  if (values.version === true) return { kind: "version" };
  if (values.model === undefined) throw new EngineUsageError("`-m <model-dir>` is required");
  if ((values["distributed-config"] === undefined) !== (values["node-id"] === undefined)) {
    throw new EngineUsageError("`--distributed-config` and `--node-id` go together");
  }
  const maxSequences = integer("max-sequences", values["max-sequences"], 16, 1, 4096);
  return {
    kind: "run",
    options: {
      modelDir: values.model,
      distributedConfig: values["distributed-config"],
      nodeId: values["node-id"],
      host: values.host ?? "127.0.0.1",
      port: integer("port", values.port, 8080, 0, 65535),
      noWarmup: values["no-warmup"] === true,
      transportTokenFile: values["transport-token-file"],
      modelName: values["model-name"],
      connectTimeoutMs: integer("connect-timeout-ms", values["connect-timeout-ms"], 60_000, 1, 24 * 3600_000),
      brokenExitDelayMs: integer("broken-exit-delay-ms", values["broken-exit-delay-ms"], 2000, 0, 600_000),
      computeStallMs: integer("compute-stall-ms", values["compute-stall-ms"], 30_000, 100, 24 * 3600_000),
      largeHeartbeatMs: integer("large-heartbeat-ms", values["large-heartbeat-ms"], 30_000, 0, 24 * 3600_000),
      clientStallMs: integer("client-stall-ms", values["client-stall-ms"], 60_000, 100, 24 * 3600_000),
      drainMs: integer("drain-ms", values["drain-ms"], 3000, 0, 24 * 3600_000),
      threads: integer("threads", values.threads, availableParallelism(), 1, 1024),
      maxSequences,
      maxQueued: integer("max-queued", values["max-queued"], maxSequences * 8, 0, 1_000_000),
      contextLength: values["context-length"] === undefined ? undefined : integer("context-length", values["context-length"], 0, 1, 2 ** 31 - 1),
    },
  };
}
