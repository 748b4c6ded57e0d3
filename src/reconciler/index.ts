/** The reconciler: the daemon, one pass per cluster, and the status files CI reads. */
export { startDaemon, requestsDirOf, type Daemon, type DaemonOptions } from "./daemon.js";
export { Reconciler, type ReconcilerOptions } from "./reconciler.js";
export { nextAction, type NextAction, type DesiredState, type ObservedState, type DecisionMemory, type StallReason } from "./next-action.js";
export {
  heldEntry,
  isOwnedBy,
  desiredStateOf,
  observedStateOf,
  readDirectoryView,
  identifyPlan,
  launchCountOf,
  planSummaryOf,
  decisionMemoryOf,
  type DirectoryView,
  type Sightings,
  type IdentifiedPlan,
  type RestartCount,
} from "./decision-inputs.js";
export { WorkQueue, type PassOutcome } from "./queue/work-queue.js";
export { daemonWatching, describeSilence, findDaemon, type DaemonSighting } from "./daemon-lock.js";
export { dropReconcileRequest, requestTaken } from "./reconcile-request.js";
export { StatusFeed, type StatusFeedEvents, type StatusFileFailure } from "./status-feed.js";
export { unobservableConditions } from "./steps/supervise.js";
export * from "./status/index.js";
