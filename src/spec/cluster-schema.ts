/**
 * The zod schema of a cluster definition (`clusters/<name>.toml`), as written in TOML. Defaults that
 * come from the settings (transport backend and port range) or from the file (name, router backend)
 * are left optional here and resolved by `normaliseCluster`, so the JSON Schema stays honest.
 */
import { z } from "zod";
import { defaultEngineKind, engineKinds, engineOf } from "../engines/index.js";
import { hostSchema } from "./host.js";
import { patternString } from "./patterns.js";
import { portRangeSchema, transportBackends } from "./settings-schema.js";

/** The most `[engine] extra_args` a definition may hold. */
export const maxExtraArgs = 64;

// Which arguments an engine refuses depends on its kind, so they are checked beside the schema
// (checkEngine), not by it.
const extraArgSchema = patternString("arg", 4096);

/** "mlxcel (mlxcel-server) or reference (shard-engine)": each kind with its program. */
const kindChoices = engineKinds.map((kind) => `${kind} (${engineOf(kind).programName})`).join(" or ");

const modelSchema = z
  .object({
    id: patternString("modelId").describe("Hub repository id 'org/name' (source hub) or a model directory path (source path or push)."),
    revision: patternString("revision", 255).default("main").describe("Hub branch, tag or 40-hex commit. Default main."),
    source: z
      .enum(["hub", "path", "push"])
      .default("hub")
      .describe("hub: nodes download from the Hub; path: already on each node; push: copied from this machine. Default hub."),
    context_length: z
      .number()
      .int()
      .min(1)
      .max(16_777_216)
      .default(4096)
      .describe(
        "Context length in tokens the KV cache is sized for: the most one request may hold, prompt and completion together (shard-engine refuses a longer prompt and stops a completion there; mlxcel and mlx-lm are not told, having no known flag for it, and bound requests by the model's own limit). Default 4096.",
      ),
    max_sequences: z
      .number()
      .int()
      .min(1)
      .max(4096)
      .default(1)
      .describe("Concurrent sequences the KV cache is sized for; shard-engine generates at most this many at once, later requests wait their turn. Default 1."),
    files: z.enum(["stage", "all"]).default("stage").describe("stage: each node gets only the files its layers need; all: every file. Default stage."),
    verify: z.enum(["fast", "full"]).default("fast").describe("fast: sizes and headers; full: sha256 of every file. Default fast."),
  })
  .strict();

const engineSchema = z
  .object({
    kind: z.enum(engineKinds).default(defaultEngineKind).describe(`${kindChoices}. Default ${defaultEngineKind}.`),
    binary: patternString("binary").optional().describe("Engine executable on the nodes. Default: the kind's command on PATH."),
    python: patternString("binary").optional().describe("mlx-lm: the Python interpreter on each node that has mlx-lm installed. Default python3."),
    version: patternString("version", 64).optional().describe("Expected engine version; nodes reporting another are refused."),
    extra_args: z.array(extraArgSchema).max(maxExtraArgs).default([]).describe("Extra engine arguments, one per element. Default none."),
    load_timeout_seconds: z
      .number()
      .int()
      .min(1)
      .max(86_400)
      .optional()
      .describe(
        "How long the engine may take to load the model, seconds: each launch step that waits for it (a stage listening or joining the ring, the coordinator's /health, the first token) waits at least this long. Default: 60 s to listen, 120 s for /health, 60 s for the first token (mlx-lm loads the model only then).",
      ),
    health_silence_seconds: z
      .number()
      .int()
      .min(1)
      .max(3_600)
      .optional()
      .describe(
        "How long the coordinator's /health may go without answering before the running cluster is judged dead (CoordinatorUnhealthy), seconds. For an engine that cannot answer /health while it generates (a server that handles one request at a time): set it above the longest a request takes. A refusal or an answer other than ready still counts at once (two in a row). Default: 3 silent probes of 1 s.",
      ),
    generation_watchdog_seconds: z
      .number()
      .int()
      .min(0)
      .max(3_600)
      .optional()
      .describe(
        "Longest a one-token completion may take before the running cluster is judged hung (GenerationHung), seconds; one is sent every half of it, and two answered with a server error other than 503, or with no completion, are a death too (GenerationFailed). For an engine whose /health may answer 200 through a hung pipeline. 0 turns it off. Set it above the longest a request can wait for a free slot under load, and above the longest prompt a client can send takes to process (up to context_length tokens; shard-engine counts on /health the prompt tokens it processes, 512 at a time, which counts as work, so for it the time one such chunk takes). Default: the engine's own (mlx-lm 20; none for mlxcel and shard-engine, whose /health is trusted).",
      ),
  })
  .strict();

const transportSchema = z
  .object({
    backend: z.enum(transportBackends).optional().describe("tcp, thunderbolt or rdma. Default: the settings' transport_backend."),
    port_range: portRangeSchema.optional().describe("Inclusive transport port range. Default: the settings' port_range."),
  })
  .strict();

const coordinatorSchema = z
  .object({
    node: patternString("name", 63).default("local").describe('"local" (this machine) or a registered node. Default local.'),
    host: hostSchema(253)
      .default("127.0.0.1")
      .describe("Address the coordinator's HTTP listener binds (HTTP only: the stages reach the coordinator at its node's address). Default 127.0.0.1."),
    port: z.number().int().min(1).max(65535).default(8080).describe("HTTP port of the coordinator. Default 8080."),
  })
  .strict();

const planSchema = z
  .object({
    strategy: z.enum(["equal", "memory"]).default("equal").describe("equal: mlxcel's own split; memory: proportional to node budgets (reference engine). Default equal."),
    headroom: z.number().min(1).max(10).default(1.2).describe("Memory budget divisor. Default 1.2."),
    allow_unvalidated_family: z.boolean().default(false).describe("Allow model families outside the validated Llama family. Default false."),
  })
  .strict();

const routerSchema = z
  .object({
    register: z.boolean().default(true).describe("Register the coordinator with the router once Ready. Default true."),
    backend: patternString("name", 63).optional().describe("Backend name in the router. Default: the cluster name."),
    weight: z.number().int().min(1).max(1000).optional().describe("Backend weight. Default: the settings' router weight."),
  })
  .strict();

export const clusterSchema = z
  .object({
    name: patternString("name", 63).optional().describe("Cluster name. Default: the file name without .toml (they must agree)."),
    desired: z.enum(["running", "stopped"]).default("running").describe("running or stopped. Default running."),
    suspend: z.boolean().default(false).describe("Take no action at all while true. Default false."),
    nodes: z.array(patternString("name", 63)).min(1).max(256).describe("Registered node names, in stage order."),
    model: modelSchema,
    engine: engineSchema.prefault({}),
    transport: transportSchema.prefault({}),
    coordinator: coordinatorSchema.prefault({}),
    plan: planSchema.prefault({}),
    router: routerSchema.prefault({}),
  })
  .strict()
  .describe("A shardctl cluster definition (clusters/<name>.toml)");

export type ClusterInput = z.input<typeof clusterSchema>;
export type ClusterOutput = z.output<typeof clusterSchema>;
