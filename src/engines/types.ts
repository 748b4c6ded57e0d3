/**
 * What shardctl knows about an engine: its facts (what the planner, the spec checks, the node
 * probes, launch and health ask about it) and its driver (what one launch writes and runs).
 */
import type { EngineKind } from "./kinds.js";

export type TransportBackend = "tcp" | "thunderbolt" | "rdma";

/** An `IP:port` endpoint. Engines are given IP addresses, not host names (mlxcel's cluster TOML needs them). */
export interface Endpoint {
  host: string;
  port: number;
}

export interface StageSlot {
  /** Stage index, 0..N-1 in pipeline order. */
  index: number;
  /** Node id in the engine's cluster TOML, e.g. `stage-0`. */
  id: string;
  /** The transport address this stage binds and its peers connect to. */
  address: Endpoint;
  /** Half-open layer range [start, end). */
  layers: [number, number];
  /**
   * Threads the stage computes with (the reference engine's `--threads`), set when several stages
   * share one machine's cores; undefined: the engine's default (all of its machine's cores).
   */
  threads?: number;
}

export interface CoordinatorSlot {
  id: string;
  /** Control address written to the cluster TOML; must differ from the HTTP listener. */
  address: Endpoint;
  /** The OpenAI-compatible HTTP listener. */
  http: Endpoint;
  /** Threads the coordinator computes with (`--threads`): it holds no layers, so 1. Undefined: the engine's default. */
  threads?: number;
}

/** The whole engine topology of one launch. */
export interface EngineTopology {
  cluster: string;
  /** The model name clients send and the router routes by. */
  modelName: string;
  /** Sequences the KV caches are planned for (`max_sequences`): an engine that can be told so caps its concurrent requests there. */
  maxSequences: number;
  /** Tokens per sequence the KV caches are planned for (`context_length`): an engine that can be told so refuses longer requests. */
  contextLength?: number;
  transport: TransportBackend;
  stages: StageSlot[];
  coordinator: CoordinatorSlot;
  /** Write explicit per-stage `layers` (the `memory` strategy; only engines that accept them). */
  explicitLayers: boolean;
}

/** Paths of the per-launch files on the node where a process runs. */
export interface ProcessFiles {
  /** The model snapshot directory on that node. */
  modelDir: string;
  /** The engine cluster TOML written on that node. */
  clusterConfig: string;
  /** The per-launch transport token (mode 0600) on that node, for engines that authenticate. */
  tokenFile: string;
  /** An empty per-launch directory on that node, for an engine's caches (mlx-lm's Hugging Face cache). */
  cacheDir: string;
}

export interface EngineDriver {
  /** The facts of the engine this driver starts. */
  readonly facts: EngineFacts;
  /** The file name of the engine's cluster config in each run directory, e.g. "cluster.toml". */
  readonly clusterConfigName: string;
  /** The engine's cluster config for this topology (written on every node of the launch). */
  renderClusterConfig(topology: EngineTopology): string;
  /**
   * The order stages are started in, as waves of stage indices: every stage of a wave is started,
   * then each is waited on until it is up (`readiness.stageUp`), before the next wave starts.
   */
  startOrder(topology: EngineTopology): number[][];
  /** argv of one stage worker. */
  stageArgv(topology: EngineTopology, stage: StageSlot, files: ProcessFiles): string[];
  /** argv of the coordinator; only asked of engines whose `readiness.httpServer` is "coordinator". */
  coordinatorArgv(topology: EngineTopology, files: ProcessFiles): string[];
  /** argv that prints the engine version (the probe's `<binary> --version`). */
  versionArgv(): string[];
}

/** Driver options from the cluster definition's `[engine]` table. */
export interface DriverOptions {
  /** `[engine] binary`: overrides the driver's default program. */
  binary?: string;
  /** `[engine] extra_args`, appended to every process's argv. */
  extraArgs: readonly string[];
  /** `[engine] python`: the interpreter of engines run as a Python module. */
  python?: string;
}

/** An engine kind: its facts, and how to make a driver for one launch. */
export interface Engine {
  readonly facts: EngineFacts;
  createDriver(options: DriverOptions): EngineDriver;
}

/**
 * Everything shardctl must know about an engine kind outside its driver. Each field is asked by
 * the code that used to compare kind strings; a new engine kind answers all of them.
 */
export interface EngineFacts {
  /** The `[engine] kind` that selects this engine. */
  readonly kind: EngineKind;
  /** The engine's name in messages, e.g. "mlxcel". */
  readonly name: string;
  /** The engine's program name, for documentation: "mlxcel-server". */
  readonly programName: string;
  /**
   * The program the driver runs when `[engine] binary` is unset, looked up on each node's PATH;
   * undefined when the engine ships with shardctl and the driver runs the bundled copy.
   */
  readonly defaultBinary: string | undefined;
  /**
   * The command the node probe runs to learn the engine's version (its first output line), given
   * the definition's `[engine]` table; undefined skips the question. A bundled engine is this
   * installation's own, so its version is known and a node without it is no sign of a missing install.
   */
  versionCommand(options: Pick<DriverOptions, "binary" | "python">): string[] | undefined;
  /** The interpreter that runs the engine as a module, named by `[engine] python`; undefined for a program of its own. */
  readonly interpreter?: "python";
  /** The accelerators the engine runs on; undefined when it runs on any node. */
  readonly runsOn: AcceleratorSupport | undefined;
  /**
   * Whether the engine takes explicit per-stage layer ranges from its cluster config. The
   * planner's "memory" strategy needs them; without them only `ownSplit` can be planned.
   */
  readonly acceptsExplicitLayers: boolean;
  /** The split the engine computes when it is given no layer ranges (the "equal" strategy). */
  readonly ownSplit: LayerSplit;
  /**
   * Why the engine at `version` (as the node probe reports it, or as `[engine] version` declares
   * it) would run its own split of `layers` over `stages` wrongly, naming the layers; undefined when
   * it would not. Undefined for engines without such a defect.
   */
  readonly splitDefect?: (version: string, layers: number, stages: number) => string | undefined;
  /**
   * The engine's own number for the stage at `stage` (layer order) of `stages`, when it numbers
   * them otherwise (mlx-lm's ring ranks run in reverse); undefined: the stage index.
   */
  readonly rankOfStage?: (stage: number, stages: number) => number;
  /**
   * Where the embedding, final norm and lm_head live. "ends": the embedding on the first stage,
   * norm and head on the last (the embedding too when tied). "every-stage": every stage keeps all,
   * and every other tensor outside the layers too (each rank loads every file holding one).
   */
  readonly nonLayerTensors: "ends" | "every-stage";
  /**
   * Whether the engine reads which file holds which tensor from model.safetensors.index.json, and
   * cannot load a model without one (a single model.safetensors). Undefined: either is loaded.
   */
  readonly needsWeightIndex?: boolean;
  /**
   * Whether the engine's transport takes IPv4 addresses only (MLX's ring parses nothing else, and
   * exits with "Can't parse address" on `[::1]:port` as on `::1:port`): launch resolves node
   * names to IPv4 addresses and refuses a node given by an IPv6 address. Undefined: any IP.
   */
  readonly ipv4Only?: boolean;
  /**
   * Why the coordinator's `--host` must be an IPv4 address, when it must: an engine that reads
   * `--host:--port` as one socket address exits at start on a host name ("localhost") or an IPv6
   * address. Undefined: any host its listener accepts.
   */
  readonly httpHostIPv4?: string;
  /** The model families the engine is validated on; others are planned only on request. */
  readonly modelFamilies: ValidatedFamilies;
  /**
   * What the engine's loader reads, where it reads less than the planner accepts: a model outside
   * it is a plan error, not a launch that fails at load. Undefined: what the planner accepts.
   */
  readonly modelFormat?: ModelFormat;
  /**
   * Whether the engine authenticates transport peers with a per-launch token. When true, launch
   * writes a fresh token (mode 0600) beside the cluster config on every node; when false the
   * transport must run on a trusted network segment.
   */
  readonly authenticatesTransport: boolean;
  /** What `[engine] extra_args` may not contain. */
  readonly extraArgs: ExtraArgRules;
  /** Advice on how many stages to use. */
  readonly stageCount: StageCountAdvice;
  /**
   * How the engine's stages share the cores of one machine that runs several of them (nodes with
   * the same registry `host`), as the plan's StagesShareMachine note says it; undefined when the
   * engine has no say in it.
   */
  readonly sharedMachineCores: string | undefined;
  /**
   * The divisor a node's memory is divided by to get the budget a plan may fill (≥ 1; 1.2 keeps
   * a sixth of it free). The planner's default when a plan names no headroom.
   */
  readonly memoryHeadroom: number;
  /**
   * The name a request's `model` must carry for the engine to serve it, whatever clients ask for
   * (the router rewrites it); undefined: the engine serves the name clients use.
   */
  readonly servedModelName?: string;
  /** How launch and health tell the engine's processes are up, loading or dead. */
  readonly readiness: EngineReadiness;
  /**
   * The peer a process of this engine named, in the last lines of its log, as having gone silent
   * (nothing on their link for the engine's liveness bound: stopped, frozen, cut off) — the reason it
   * exits or reports its pipeline broken; undefined when the lines name none. Undefined for an
   * engine that never says: a process's death then names that process alone, as nothing tells
   * whether a peer hung first.
   */
  readonly silentPeerIn?: (logTail: readonly string[]) => SilentPeerReport | undefined;
  /**
   * The peers a process of this engine said, in the last lines of its log, it still heard from when
   * its pipeline broke: they were answering then, whatever another member says of the link between
   * them (a cut between two members leaves both answering a third). Undefined for an engine that
   * never says.
   */
  readonly answeringPeersIn?: (logTail: readonly string[]) => readonly string[];
  /**
   * The peer whose link closed (reset, or closed by its end), as a process of this engine named it
   * in the last lines of its log: the reason it exits (or its pipeline broke). The peer most likely
   * died a moment before, so an exit seen first may be this consequence of its death. Undefined for
   * an engine that never says: an exit is then blamed on the process seen exiting.
   */
  readonly lostPeerIn?: (logTail: readonly string[]) => LostPeerReport | undefined;
  /**
   * Whether a stage of this engine said, in the last lines of its log, that it could not reach the
   * next stage: which one, at what address, and the error. A launch that failed at a later step
   * (the coordinator exits when its pipeline cannot form) failed because of that link. Undefined
   * for an engine that never says.
   */
  readonly nextStageUnreachableIn?: (logTail: readonly string[]) => UnreachableNextStage | undefined;
}

/** A stage that could not reach the next stage of its pipeline. */
export interface UnreachableNextStage {
  /**
   * The next stage's node id in the engine's cluster config (`stage-1`), or `coordinator` for the
   * last stage, whose results go to the coordinator's control address.
   */
  peer: string;
  /** Its transport address, `host:port`. */
  address: string;
  /** What the connection attempts ended with. */
  error: string;
}

/** A pipeline member another one reported silent. */
export interface SilentPeerReport {
  /** The peer's node id in the engine's cluster config (`stage-0`, `coordinator`). */
  peer: string;
  /** What the peer is to the reporter: `upstream`, `downstream`, `coordinator`, `stage`. */
  link: string;
  /** How long nothing came from it before it was declared dead, ms. */
  silentMs: number;
}

/** A pipeline member whose link another one saw close. */
export interface LostPeerReport {
  /** The peer's node id in the engine's cluster config (`stage-1`, `coordinator`). */
  peer: string;
  /** What the peer is to the reporter: `upstream`, `downstream`, `coordinator`, `stage`. */
  link: string;
  /** How the link ended, in the engine's words. */
  reason: string;
}

export interface AcceleratorSupport {
  /** Accelerator families, as node probes and the registry name them ("apple-silicon", "cuda", "cpu"). */
  readonly accelerators: readonly string[];
  /** How messages name them: "Apple silicon". */
  readonly name: string;
}

export interface LayerSplit {
  /** How messages name the split: "mlxcel's split". */
  readonly name: string;
  /**
   * Layer counts per stage, in stage order, for `layers` layers over `stages` stages. A count ≤ 0
   * means the split leaves that stage without layers (the plan reports it).
   */
  countLayers(layers: number, stages: number): number[];
  /**
   * Set when `countLayers` is the engine's split only for layers of equal size, and another rule,
   * not known here, splits the others (mlxcel balances a mixture-of-experts or mixed-layer model by
   * its real per-layer bytes): the words that say so.
   */
  readonly equalLayersOnly?: string;
}

export interface ValidatedFamilies {
  /** `model_type` values of config.json the engine is validated on, e.g. "llama". */
  readonly families: readonly string[];
  /** How messages name the group: "Llama family". */
  readonly name: string;
  /** True when the engine cannot run other families at all (no `allow_unvalidated_family`). */
  readonly only?: boolean;
}

/** The models an engine's loader reads (EngineFacts.modelFormat). */
export interface ModelFormat {
  /** Safetensors dtypes of the tensors it loads as values: unquantized weights, norms, quantization scales and biases. */
  readonly floatDtypes: readonly string[];
  /** MLX quantization it loads. */
  readonly quantization: {
    /** Bit widths, each with the number its group size must be a multiple of. */
    readonly bits: ReadonlyArray<{ readonly bits: number; readonly groupSizeMultiple: number }>;
    /** Modes (config.json `quantization.mode`; "affine" stores scales and biases). */
    readonly modes: readonly string[];
    /** Whether it reads a module's own group size from config.json; false: every module is read with the default one. */
    readonly perModuleGroupSize: boolean;
  };
  /** config.json fields it requires that the planner does without, e.g. "intermediate_size". */
  readonly requiredConfigFields: readonly string[];
  /** `rope_scaling` types it implements; a config.json naming another cannot be loaded. */
  readonly ropeScalingTypes: readonly string[];
  /** Whether it reads config.json's top level and tensors named `model.*` and `lm_head.*` only, not a multimodal checkpoint's `text_config` and `language_model.*`. */
  readonly topLevelOnly: boolean;
}

export interface ExtraArgRules {
  /**
   * Flags the engine rejects in distributed mode, or that would hide it from launch and health,
   * each with why (the text a refusal gives). A flag matches `--flag` and `--flag=value`.
   */
  readonly refused: Readonly<Record<string, string>>;
  /** Flags the driver sets on every process itself; a second copy would contradict it. */
  readonly setByDriver: readonly string[];
  /**
   * Every flag the engine's own program reads (long and short), when it is known exactly: its
   * parser refuses any other, which would stop every process at start. Checked only when the
   * definition runs that program (no `[engine] binary` naming another). Undefined: not known.
   */
  readonly flags?: readonly string[];
  /**
   * The engine's own program's flags that take an integer, with the least and most it accepts
   * (inclusive): a value outside, or no number, stops every process at start. Checked as `flags` is.
   */
  readonly integers?: Readonly<Record<string, readonly [number, number]>>;
}

export interface StageCountAdvice {
  /** The most stages the engine is validated best on; a plan with more warns (MoreThanTwoStages). */
  readonly validatedUpTo: number;
  /** Why more stages are discouraged, as the warning says it after "<n> stages: ". */
  readonly advice: string;
}

/**
 * How launch waits for the engine and how health watches it. The coordinator serves an
 * OpenAI-compatible HTTP API; stage workers have no HTTP listener.
 */
export interface EngineReadiness {
  /** GET path on the coordinator's HTTP listener that says whether it can serve. */
  readonly healthPath: string;
  /** The status `healthPath` answers once the model is loaded and every stage connected. */
  readonly readyStatus: number;
  /**
   * The status `healthPath` answers while the coordinator is still loading: not ready, yet not
   * dead (health reports "loading"; any other status is "down"). Undefined: no status means loading.
   */
  readonly loadingStatus: number | undefined;
  /**
   * For an engine whose `loadingStatus` also means a broken pipeline: given such an answer's body
   * (on one line), the engine's words when it says it is broken (a lost stage link) rather than
   * loading, else undefined. Health then reports "down" with those words, not "loading". Absent:
   * that status always means loading.
   */
  readonly brokenIn?: (body: string) => string | undefined;
  /**
   * The ready `healthPath` answer vouches for every link of the pipeline: the engine checks its
   * links in band (heartbeats) and answers not ready once one is lost. A stage's transport port
   * silent to new connections while the coordinator answers ready is then a path new connections
   * cannot take (a firewall that lets only established connections through, a full accept queue),
   * not a cut pipeline: the cluster shows Degraded and serves on. Absent: that silence is a death.
   */
  readonly healthCoversLinks?: boolean;
  /**
   * For an engine whose ready `healthPath` answer counts the work it has done since it started
   * (tokens generated, and prompt tokens processed where it says so): that count, from the answer's
   * body, else undefined. A generation watchdog whose one-token completion timed out then asks
   * again: a count that grew meanwhile is a pipeline that works for others while every slot is
   * busy (or on a long prompt, chunk by chunk), not a hung one. Absent: a timeout is a hang.
   */
  readonly progressIn?: (body: string) => number | undefined;
  /**
   * For an engine that takes no new request in while it processes a prompt, and logs each step of
   * it on its HTTP server's log: that step, from one log line (the time the line gives, ms on the
   * node's own clock, and how many of the prompt's tokens are processed, of how many), else
   * undefined. A generation watchdog reads the end of that log as each probe begins and once one
   * timed out: a step logged since the probe began, or a prompt still being processed whose last step is
   * younger than twice the longest step it took so far, is a pipeline busy with a long prompt, not
   * a hung one. Absent: a timeout is judged without the log.
   */
  readonly promptStepIn?: (line: string) => PromptStep | undefined;
  /**
   * POST path of the OpenAI-compatible completions endpoint. Launch generates one token through
   * it before it calls a cluster ready: a healthy listener is not yet a working pipeline.
   */
  readonly completionsPath: string;
  /**
   * How a stage shows it is up. "transport-listening": its transport port accepts TCP
   * connections from the coordinator's node; launch waits for every stage's port before it
   * starts the coordinator, and health probes the ports while the cluster runs.
   * "ring-log-line": the stage joins a ring whose ports must never be probed (the first connection
   * a ring port accepts becomes its neighbour): launch waits for `ringLog.ready` in its log, and
   * health never connects to the ports.
   */
  readonly stageUp: "transport-listening" | "ring-log-line";
  /**
   * Which process serves the OpenAI-compatible HTTP API. "coordinator": a process of its own that
   * holds no layers. "last-stage": the stage holding the last layers serves it (no coordinator
   * process; its node is the one `[coordinator]` names).
   */
  readonly httpServer: "coordinator" | "last-stage";
  /** The log line of a ring engine that says a stage is up. */
  readonly ringLog?: RingLog;
  /**
   * A generation watchdog for engines whose health endpoint answers 200 whatever the pipeline's
   * state: health sends a one-token completion every `intervalMs` and declares the cluster dead
   * when one takes longer than `timeoutMs` (a hung ring). Undefined: the health endpoint suffices.
   */
  readonly generationWatchdog?: GenerationWatchdog;
  /**
   * What the exit of one process means. "ends-pipeline": the engine cannot re-form a pipeline
   * around a lost stage or coordinator, so health treats any exit as the cluster's death and
   * supervision tears the whole cluster down (the next pass relaunches it).
   */
  readonly processExit: "ends-pipeline";
}

export interface RingLog {
  /** The line a stage of `rank` prints once it listens for its neighbour (a regular expression's source). */
  ready(rank: number): string;
}

/** One step of a prompt an engine logged (EngineReadiness.promptStepIn). */
export interface PromptStep {
  /** When, ms on the node's clock (only differences between steps are used). */
  atMs: number;
  /** Tokens of the prompt processed so far. */
  done: number;
  /** Tokens of the prompt. */
  total: number;
}

/** How the generation watchdog probes an engine (see EngineReadiness.generationWatchdog). */
export interface GenerationWatchdog {
  /** Pause between probes, ms. */
  readonly intervalMs: number;
  /** Longest a probe may take before the pipeline is judged hung, ms. */
  readonly timeoutMs: number;
  /**
   * Whether the engine sends a streamed completion's response head only once its generation loop
   * has taken the request in. Then a head without a token in time says the loop turns and the
   * request waits for a slot that other requests hold (a busy cluster, not a hung one), and the
   * probe is streamed so that only a missing head is a hang. False: only a whole answer in time
   * counts.
   */
  readonly headMeansTaken: boolean;
}
