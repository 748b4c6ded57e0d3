/**
 * Launch: port allocation, the ledger, the ordered all-or-nothing bring-up,
 * teardown, and supervision of a running cluster (any death → deregister and tear down).
 */
// Engine drivers live in src/engines; re-exported here for the callers that launch with them.
export {
  createDriver,
  bundledShardEngine,
  bundledShardEngineCommand,
  type EngineKind,
  type EngineDriver,
  type DriverOptions,
  type EngineTopology,
  type ProcessFiles,
  type StageSlot,
  type CoordinatorSlot,
  type Endpoint,
  type TransportBackend,
} from "../engines/index.js";
export { launchCluster } from "./bring-up.js";
export { routerBackendOf } from "./router-backend.js";
export { teardownCluster, type TeardownContext, type TeardownResult } from "./teardown.js";
export { superviseCluster, type SuperviseOptions, type SupervisionOutcome, type Supervision } from "./supervise.js";
export { keepLogsBounded, trimLogs, defaultLogLimits, type LogLimits } from "./log-keeper.js";
export { clipCommand, stopLeftoverListeners } from "./leftover-listeners.js";
export { claimOf, type RunClaim } from "./run-claim.js";
export { Ledger, isRunFolderOf, type LedgerEntry, type LedgerProcess, type LedgerPort, type ProcessRole } from "./ledger.js";
export { allocatePorts, type PortRange, type PortRequest, type PortHolder } from "./ports.js";
export { ownHttpListener, portsHeldBy, transportPortRequests, type TransportPortRequest } from "./allocate-topology.js";
export { LaunchError } from "./launch-error.js";
export { processLabel, isProcessAlive, askExit, describeExit, readLogTail, stopEngineProcess, type StopOutcome } from "./processes.js";
export { askCoordinatorHealth, probeOneToken } from "./coordinator-probes.js";
export {
  defaultDeadlines,
  type LaunchDeadlines,
  type LaunchRequest,
  type LaunchContext,
  type LaunchResult,
  type StageTarget,
  type CoordinatorTarget,
  type TimelineEvent,
} from "./types.js";
