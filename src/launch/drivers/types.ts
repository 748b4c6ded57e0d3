/** What every engine driver needs to know about one launch, and what it produces. */

export type TransportBackend = "tcp" | "thunderbolt" | "rdma";

/** An `IP:port` endpoint. mlxcel wants IP addresses, not host names, in its cluster TOML. */
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
}

export interface CoordinatorSlot {
  id: string;
  /** Control address written to the cluster TOML; must differ from the HTTP listener. */
  address: Endpoint;
  /** The OpenAI-compatible HTTP listener. */
  http: Endpoint;
}

/** The whole engine topology of one launch. */
export interface EngineTopology {
  cluster: string;
  /** The model name clients send and the router routes by. */
  modelName: string;
  transport: TransportBackend;
  stages: StageSlot[];
  coordinator: CoordinatorSlot;
  /** Write explicit per-stage `layers` (the `memory` strategy; the reference engine only). */
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
}

export interface EngineDriver {
  readonly kind: string;
  /** Whether the engine authenticates transport peers with a per-launch token. */
  readonly authenticatesTransport: boolean;
  /** Whether the engine accepts explicit per-stage layer ranges. */
  readonly acceptsExplicitLayers: boolean;
  /** The engine cluster TOML for this topology (written on every node of the launch). */
  renderClusterConfig(topology: EngineTopology): string;
  /** argv of one stage worker. */
  stageArgv(topology: EngineTopology, stage: StageSlot, files: ProcessFiles): string[];
  /** argv of the coordinator. */
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
}
