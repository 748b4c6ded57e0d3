import type { EngineFacts } from "../types.js";
import { promptStepIn } from "./prompt-step.js";
import { ringNeighbourUnreachableIn } from "./ring-log.js";
import { describeSplitDefect } from "./split-defect.js";
import { mlxLmSplit, rankOfStage } from "./split-layers.js";

/**
 * Model families (config.json `model_type`) mlx-lm 0.32.2 serves with a model class that has
 * `pipeline`: the only ones its `--pipeline` mode can serve. mlx-lm renames some types before it
 * picks a class (`kimi_k2`, `joyai_llm_flash` → deepseek_v3; `deepseek_v41_text` → deepseek_v41)
 * and some classes subclass a pipelined one (`qwen3_5_moe`, `prism_hadamard_qwen35` → qwen3_5;
 * `glm_moe_dsa` → deepseek_v32; `solar_open` → glm4_moe), so those are listed too; `kimi_k25`
 * pipelines its deepseek_v3 language model. Llama and Mistral (renamed to llama) are
 * tensor-parallel only there. kimi_k3 and bailing_hybrid pipeline too, but each splits its layers
 * its own way (kimi_k3 gives the extra layers to the first ranks in layer order, bailing_hybrid
 * splits whole layer groups), so a node would run other layers than the plan sized and staged for
 * it: left out until the planner knows their splits.
 */
export const mlxLmPipelineFamilies = [
  "deepseek_v2",
  "deepseek_v3",
  "deepseek_v32",
  "deepseek_v41",
  "deepseek_v41_text",
  "glm4_moe",
  "glm4_moe_lite",
  "glm_moe_dsa",
  "joyai_llm_flash",
  "kimi_k2",
  "kimi_k25",
  "minimax_m3_vl",
  "ministral3",
  "mistral4",
  "muse_spark",
  "prism_hadamard_qwen35",
  "qwen2",
  "qwen3_5",
  "qwen3_5_moe",
  "qwen3_moe",
  "qwen3_next",
  "solar_open",
] as const;

/**
 * mlx-lm's distributed server (`python -m mlx_lm.server --pipeline`), Apple's MLX: shardctl starts
 * every rank itself (never `mlx.launch`, which would ssh on its own and hide the processes) with
 * the ring backend's environment, rank 0 on the node of the last layers.
 */
export const mlxLmFacts = {
  kind: "mlx-lm",
  name: "mlx-lm",
  programName: "mlx_lm.server",
  // Run as a module of `[engine] python` (default python3) on each node.
  defaultBinary: "python3",
  versionCommand: (options) => [options.python ?? "python3", "-c", "import mlx_lm, mlx.core; print('mlx-lm', mlx_lm.__version__, 'mlx', mlx.core.__version__)"],
  interpreter: "python",
  // MLX runs on Apple silicon, CUDA and (the mlx-cpu wheel) plain CPUs.
  runsOn: undefined,
  // The server computes its own split (no option names another one).
  acceptsExplicitLayers: false,
  ownSplit: { name: "mlx-lm's split", countLayers: mlxLmSplit },
  rankOfStage,
  // Before 0.32.0 an uneven split silently skipped layers.
  splitDefect: describeSplitDefect,
  // Every rank keeps the embeddings, the final norm and lm_head, and computes full logits; it loads
  // every file holding a tensor outside the layers.
  nonLayerTensors: "every-stage",
  // Its pipelined load opens model.safetensors.index.json to find each rank's files.
  needsWeightIndex: true,
  modelFamilies: { families: mlxLmPipelineFamilies, name: "families mlx-lm 0.32.2 pipelines with its even split", only: true },
  // A rank still connecting to its neighbour when a launch's wait ended: the ring never formed
  // because the link between their nodes is down or blocked (rank 0's HTTP never binds then).
  nextStageUnreachableIn: ringNeighbourUnreachableIn,
  // The ring backend has no authentication: trusted network segments only.
  authenticatesTransport: false,
  // The ring backend parses IPv4 "ip:port" only.
  ipv4Only: true,
  extraArgs: {
    refused: {
      "--adapter-path": "mlx-lm refuses adapters in distributed mode",
      "--draft-model": "mlx-lm refuses draft models in distributed mode",
      "--num-draft-tokens": "mlx-lm refuses draft models in distributed mode",
      // Every rank looks prompts up in its own prompt cache, and must make the same choice: a byte
      // cap is compared with each rank's own KV bytes, which differ with its layer count, so ranks
      // would evict different caches and then compute different lengths of the same prompt.
      "--prompt-cache-bytes":
        "each rank compares it with its own caches' bytes, which differ with the layers it holds: ranks would keep different prompt caches and disagree on how much of a prompt to compute; cap the cache with --prompt-cache-size (a count, the same on every rank)",
      // Without batching the server answers one request at a time: the generation watchdog's
      // one-token probe waits behind each completion, and one longer than its deadline is taken
      // for a hung ring.
      "--kv-bits":
        "it turns mlx-lm's batching off, so every request waits for the one before it to finish, and the generation watchdog's one-token probe waiting behind a long completion would be taken for a hung ring",
      // The watchdog reads rank 0's progress lines (INFO) to tell a long prompt from a hang.
      "--log-level": "the generation watchdog reads the prompt progress mlx-lm logs at INFO, which shardctl runs it at",
      "--help": "mlx_lm.server prints its usage and exits: no rank would serve",
      "-h": "mlx_lm.server prints its usage and exits: no rank would serve",
    },
    setByDriver: ["--model", "--pipeline", "--host", "--port", "--decode-concurrency", "--prompt-concurrency"],
    // mlx_lm.server 0.32.2's arguments: its parser refuses any other, and every rank would stop at start.
    flags: [
      ...["--model", "--adapter-path", "--host", "--port", "--allowed-origins", "--draft-model", "--num-draft-tokens", "--trust-remote-code"],
      ...["--log-level", "--chat-template", "--use-default-chat-template", "--temp", "--top-p", "--top-k", "--min-p", "--max-tokens"],
      ...["--chat-template-args", "--decode-concurrency", "--prompt-concurrency", "--prefill-step-size", "--prompt-cache-size", "--prompt-cache-bytes"],
      ...["--kv-bits", "--kv-group-size", "--quantized-kv-start", "--pipeline", "--help", "-h"],
    ],
  },
  stageCount: {
    validatedUpTo: 2,
    advice: "each rank of mlx-lm's ring adds a network hop per token, and every rank runs the generation loop in lockstep",
  },
  memoryHeadroom: 1.2,
  // It answers only its `--model` path or "default_model" (another name is a 404): the router
  // sends "default_model" whatever name clients use.
  servedModelName: "default_model",
  sharedMachineCores: undefined,
  // /health answers 200 from the moment the server listens, while the generation thread is still
  // loading the model (only the first token shows the load done: large models need [engine]
  // load_timeout_seconds), and 503 once the generation thread died (a lost peer); it answers 200 through a hung ring, which
  // only a generated token shows. When the ring breaks, rank 0 stays up answering completions 404
  // "generation thread died" and the other ranks exit (status 0, or 134 when rank 0 died).
  readiness: {
    healthPath: "/health",
    readyStatus: 200,
    // Never "loading": 503 means the generation thread died.
    loadingStatus: undefined,
    completionsPath: "/v1/completions",
    stageUp: "ring-log-line",
    httpServer: "last-stage",
    ringLog: {
      ready: (rank) => `\\[ring\\] Rank ${rank} (accepting|connecting)`,
    },
    // A hung ring (a rank stopped, a partition, a collective deadlock) blocks every rank with no
    // timeout: a one-token completion every 10 s that takes over 20 s declares it dead (≤ 30 s; a
    // hang that begins after a probe was taken in is judged by the next probe, ≤ 60 s).
    // The server sends a streamed answer's head once its generation loop has taken the request,
    // which every rank must share (a collective): a hung ring never sends it. A head with no token
    // yet is a loop that turns while every decode slot (`--decode-concurrency`, the cluster's
    // max_sequences) is held by clients' completions, which can run for minutes: busy, not hung.
    generationWatchdog: { intervalMs: 10_000, timeoutMs: 20_000, headMeansTaken: true },
    // The loop takes no request in while it processes a prompt: one of tens of thousands of tokens
    // holds the probe's head back past its deadline, each step slower than the last. Rank 0 logs
    // every step, and a prompt whose steps keep coming is busy, not hung. (A request mlx-lm serves
    // alone, one with a `seed`, holds the probe back through its whole generation, of which it logs
    // nothing: generation_watchdog_seconds must exceed the longest of those.)
    promptStepIn,
    processExit: "ends-pipeline",
  },
} as const satisfies EngineFacts;
