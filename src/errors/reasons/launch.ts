import type { NodeReason } from "./nodes.js";
import type { RouterReason } from "./router.js";
import type { ReconcilerReason } from "./reconciler.js";

/**
 * Reasons a launch step fails (src/launch), each carried by a LaunchError with the log tail of the
 * process that failed. All transient: the reconciler relaunches within the restart budget.
 */
export type LaunchStepReason =
  /** A stage process exited before listening, or right after it started (transient). */
  | "StageExited"
  /**
   * A node did not answer during the launch (a partition): while its launch files were written, or
   * while a process was being started there — whether it started is then unknown; it is looked for,
   * and stopped, before anything is launched there again (transient).
   */
  | Extract<NodeReason, "NodeUnreachable">
  /** A stage did not listen on its port within the deadline (transient). */
  | "StageListenTimeout"
  /** The coordinator's HTTP port is already taken on its node (transient). */
  | "PortInUse"
  /**
   * A run folder the launch needs on a node belongs to another shardctl daemon (another state
   * directory) whose cluster of the same name runs from it (transient: retried with back-off).
   */
  | "RunFolderClaimed"
  /**
   * The run folder, or a folder above it, is a symbolic link or another user's: someone else could
   * have the daemon's user write files of their choosing (transient, not counted: retried once fixed).
   */
  | "RunFolderUnsafe"
  /** Every port of `[transport] port_range` is held on a node (transient). */
  | "PortRangeExhausted"
  /**
   * A stage could not reach the next stage's transport address (the link between their nodes is
   * down or blocked), so the pipeline never formed, whichever step noticed; or a stage that runs
   * stayed silent (no answer, not a refusal) from the coordinator's node (transient).
   */
  | "StageLinkUnreachable"
  /** The coordinator exited before /health answered 200, or right after it started (transient). */
  | "CoordinatorExited"
  /** The coordinator's /health did not answer 200 within the deadline (transient). */
  | "CoordinatorHealthTimeout"
  /** The one-token request against the coordinator failed (transient). */
  | "ReadinessProbeFailed"
  /** The router would not take the backend, or its config's folder cannot be written (see the router reasons). */
  | Extract<RouterReason, "RouterRegistrationFailed" | "RouterConfigUnwritable" | "RouterUnavailable">
  /** The launch could not be recorded in the daemon's state directory (a full disk, a read-only folder; transient, not counted). */
  | Extract<ReconcilerReason, "StateDirUnwritable">
  /** The launch files (cluster config, transport token) could not be written, or a step failed without a reason of its own (transient). */
  | "LaunchFilesFailed";

/** Every reason of src/launch: the failed steps, and a teardown that left something behind. */
export type LaunchReason =
  | LaunchStepReason
  /** A process of the cluster survived, or its backend is still registered; teardown is retried (transient). */
  | "TeardownIncomplete"
  /** The cluster's ledger entry is not an entry (damaged, edited by hand): what runs is unknown (terminal). */
  | "LedgerEntryUnreadable";
