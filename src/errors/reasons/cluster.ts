/** Reasons of putting one cluster's definition onto its nodes (src/cluster). */
export type ClusterReason =
  /** The definition names a node the settings' registry does not hold (terminal). */
  | "UnknownNode"
  /** The engine binary does not answer `--version` on a node; nothing the daemon does installs it (terminal). */
  | "EngineNotFound"
  /** The engine's version command ran out of time on a node (slow to load, or the node overloaded) (transient). */
  | "EngineNotAnswering"
  /** Source "path": a node has no config.json at the model path, and "path" never copies files (terminal). */
  | "ModelPathMissing"
  /** `source = "path"`: a node lacks (or has a wrong-sized) weight file its stage loads. */
  | "ModelFilesMissing"
  /** A launch was asked of a node that has no staged model (transient). */
  | "ModelNotStaged"
  /** A node's host name does not resolve to the IP address the engines need (transient). */
  | "NodeAddressUnresolved"
  /** A node's address is IPv6 and the engine's transport takes IPv4 only (MLX's ring) (terminal). */
  | "NodeAddressNotIPv4"
  /** A node is reached at a link-local IPv6 address, whose zone means nothing on other nodes (terminal). */
  | "NodeAddressUnusable"
  /** `[coordinator] host` is the loopback of a node the control machine reaches elsewhere (terminal). */
  | "CoordinatorHostUnreachable";
