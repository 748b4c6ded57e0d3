/** The parsed, fully defaulted, camelCase values the rest of shardctl reads. All frozen. */
import type { EngineKind } from "../engines/index.js";
import type { PortRange } from "./port-range.js";

export type TransportBackend = "tcp" | "thunderbolt" | "rdma";
export type Accelerator = "apple-silicon" | "cuda" | "cpu";

/** One `[nodes.<name>]` entry of the registry. */
export interface NodeEntry {
  name: string;
  /** IP address, hostname or ssh alias; "local" for the control machine itself. */
  host: string;
  /** True when `host` is "local": commands run with execa, not ssh. */
  local: boolean;
  user?: string;
  /** SSH port; unset, the ssh config's Port for the host, else 22. */
  port?: number;
  /** Absolute path on the control machine. */
  identityFile?: string;
  /** Default "strict". */
  hostKeyPolicy: "strict" | "accept-new";
  /** Absolute for local nodes (resolved against the settings directory); as written (absolute or ~/) for remote ones. */
  modelDir: string;
  /** Declared total memory, bytes. */
  memory?: number;
  /** Cap on the memory a stage may use, bytes. */
  memoryLimit?: number;
  accelerator?: Accelerator;
  engineVersion?: string;
}

export interface Settings {
  /** The settings file as given. */
  file: string;
  /** Absolute directory of the settings file; relative paths resolve against it. */
  dir: string;
  distributed: {
    /** Default false: the daemon plans and reports, but stages and launches nothing. */
    enabled: boolean;
    /** Default "tcp". */
    transportBackend: TransportBackend;
    /** Default 39600-39629. */
    portRange: PortRange;
  };
  hub: {
    /** Default https://huggingface.co. */
    endpoint: string;
    /** Default HF_TOKEN. */
    tokenEnv: string;
  };
  router: {
    /** Default "none". */
    kind: "continuum" | "none";
    /** Absolute path of the router YAML; required when kind is continuum. */
    config?: string;
    /** Default false. */
    embedded: boolean;
    adminUrl?: string;
    adminTokenEnv?: string;
    /** Admin API paths under adminUrl; each unset one is the registrar's default. */
    adminPaths?: { list?: string; register?: string; deregister?: string };
    /** Where the daemon asks whether the router answers; default derived (see the reconciler's routerHealthUrl). */
    healthUrl?: string;
    /** Default 1. */
    weight: number;
    /** The embedded router's upstream idle deadline, s. Default 600. */
    upstreamIdleSeconds: number;
  };
  daemon: {
    /** Default 30 s. */
    resyncSeconds: number;
    /** Interval of the daemon's heartbeat on its lock. Default 5 s. */
    heartbeatSeconds: number;
    /** Launches per revision. Default 3. */
    restartBudget: number;
    /** How long a launch serves before its death no longer counts earlier launches against the budget, s (0: never). Default 600. */
    restartBudgetResetSeconds: number;
    /** How long a cluster none of whose nodes answers the daemon is left as it is before its silence is judged a death, s (0: at once). Default 300. */
    cutOffGraceSeconds: number;
    /** Default false. */
    allowMassPrune: boolean;
    /** Absolute path. Default <dir>/.shardctl. */
    stateDir: string;
    /** "host:port", default off. */
    metricsAddress?: string;
    /** The dashboard's "host:port" (port 0: any free port), default off. */
    uiAddress?: string;
    /** Environment variable holding the dashboard's bearer token; required when uiAddress is not loopback. */
    uiTokenEnv?: string;
  };
  ssh: {
    /** Absolute path of the known_hosts file. Default: ~/.ssh/known_hosts. */
    knownHosts?: string;
    /** Absolute path of the ssh client config. Default: ~/.ssh/config. */
    config?: string;
  };
  /** The node registry, keyed by name (each entry also carries its name). */
  nodes: Readonly<Record<string, NodeEntry>>;
}

export interface ClusterSpec {
  /** The definition file as given. */
  file: string;
  /** The cluster name: the file stem (a `name` key must agree with it). */
  name: string;
  /** Default "running". */
  desired: "running" | "stopped";
  /** Default false. */
  suspend: boolean;
  /** Registered node names in stage order. */
  nodes: readonly string[];
  model: {
    /** As written: a Hub repo id or a path. */
    id: string;
    /** Absolute local path of the model when source is "path" or "push" (relative ids resolve against the settings directory). */
    path?: string;
    /** Default "main". */
    revision: string;
    /** Default "hub". */
    source: "hub" | "path" | "push";
    /** Tokens. Default 4096. */
    contextLength: number;
    /** Default 1. */
    maxSequences: number;
    /** Default "stage". */
    files: "stage" | "all";
    /** Default "fast". */
    verify: "fast" | "full";
  };
  engine: {
    /** Default: src/engines' defaultEngineKind ("mlxcel"). */
    kind: EngineKind;
    binary?: string;
    /** mlx-lm's interpreter on each node. Default: python3. */
    python?: string;
    version?: string;
    /** Default []. */
    extraArgs: readonly string[];
    /** The least each launch step that waits for the model to load waits, s. Default: the steps' own. */
    loadTimeoutSeconds?: number;
    /** Longest a watchdog's one-token completion may take, s; 0: none. Default: the engine's own watchdog. */
    generationWatchdogSeconds?: number;
    /** Longest the coordinator's /health may stay silent before the cluster is judged dead, s. Default: 3 silent probes. */
    healthSilenceSeconds?: number;
  };
  transport: {
    /** Default: the settings' transport backend. */
    backend: TransportBackend;
    /** Default: the settings' port range. */
    portRange: PortRange;
  };
  coordinator: {
    /** "local" (the control machine) or a registered node. Default "local". */
    node: string;
    /** Default 127.0.0.1. */
    host: string;
    /** HTTP port. Default 8080. */
    port: number;
  };
  plan: {
    /** Default "equal". */
    strategy: "equal" | "memory";
    /** Default 1.2. */
    headroom: number;
    /** Default false. */
    allowUnvalidatedFamily: boolean;
  };
  router: {
    /** Default true. */
    register: boolean;
    /** Default: the cluster name. */
    backend: string;
    /** Default: the settings' router weight. */
    weight: number;
  };
}

/** One problem in a definition or settings file, with where it is. */
export interface SpecIssue {
  file: string;
  /** 1-based. */
  line: number;
  /** 1-based. */
  col: number;
  /** The key path, e.g. `nodes[1]` or `model.id`; empty for whole-file problems. */
  path: string;
  message: string;
}

export type ParseResult<T> = { ok: true; value: T; issues: [] } | { ok: false; issues: SpecIssue[] };
