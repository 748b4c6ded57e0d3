/** Reasons of the daemon and its passes (src/reconciler): stalls, and failures of a pass's steps. */
export type ReconcilerReason =
  /** The definitions directory does not exist; nothing it defined is torn down (terminal, stalls). */
  | "DefinitionsDirMissing"
  /** The metrics listener cannot listen on `[daemon] metrics_address` (terminal: the daemon refuses to start). */
  | "MetricsListenFailed"
  /** The definitions directory is empty while clusters run; pruning them all is refused (terminal, stalls). */
  | "MassPruneRefused"
  /** The cluster definition breaks a rule; what runs keeps running (terminal, stalls). */
  | "InvalidDefinition"
  /** A cluster of this name runs from another daemon's definitions with the same state_dir (terminal, stalls). */
  | "ClusterOwnedElsewhere"
  /** The plan has errors; the stall carries the first plan error's reason (terminal, stalls). */
  | "PlanInfeasible"
  /** The cluster was launched as often as the restart budget allows at this revision (terminal, stalls). */
  | "RestartBudgetExhausted"
  /** Another daemon already watches this definitions directory (terminal). */
  | "DaemonAlreadyRunning"
  /** The daemon's user cannot create files in `[daemon] state_dir`; the daemon does not start (terminal). */
  | "StateDirUnwritable"
  /**
   * `[daemon] state_dir` or its ledger folder belongs to another user than the daemon's (or root),
   * is a link, or is writable by others it cannot take that from: the daemon does not start (terminal).
   */
  | "StateDirUnsafe"
  /** The daemon lock file could not be taken (transient). */
  | "DaemonLockFailed"
  /** A node named in the ledger is no longer in the registry; its cleanup waits for it (transient). */
  | "NodeUnregistered"
  /** A reconcile request could not be written to the daemon's requests directory (a read-only or full state_dir). */
  | "ReconcileRequestFailed"
  /** A launch would pass a node's declared memory with the clusters that run or launch there; not counted, retried with back-off (transient). */
  | "NodeMemoryTaken"
  /** A launch succeeded but left no ledger entry (transient). */
  | "LedgerMissing"
  /** A status file exists but is not a regular file or not a status; the daemon's next pass rewrites it (transient). */
  | "StatusFileUnreadable"
  /** The status file could not be written (a directory in its place, the disk full, a read-only file system); the next status is written again (transient). */
  | "StatusWriteFailed"
  /** Reading the definition failed with an error that has no reason of its own (transient). */
  | "DefinitionUnreadable"
  /** Observing what runs failed with an error that has no reason of its own (transient). */
  | "ObserveFailed"
  /** Planning failed with an error that has no reason of its own (transient). */
  | "PlanFailed"
  /** Launching failed with an error that has no reason of its own (transient). */
  | "LaunchFailed"
  /** Tearing down failed with an error that has no reason of its own (transient). */
  | "TeardownFailed"
  /** A failure nothing else names: a bug, or a step out of order (transient). */
  | "InternalError";
