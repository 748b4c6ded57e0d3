/**
 * src/errors: the one error shape of the control plane (a stable `reason`, a message for people,
 * terminal or transient), the reason catalogues of each concern, and the message of anything thrown.
 */
export { ShardctlError, isShardctlError } from "./shardctl-error.js";
export { messageOf, messageWithCauseOf, jsonErrorOf } from "./message-of.js";
export { showText, quoteText, hasUnsafeChar, firstUnsafeChar } from "./show-text.js";
export type {
  Reason,
  SpecReason,
  PlannerReason,
  NodeReason,
  StagingReason,
  LaunchReason,
  LaunchStepReason,
  RouterReason,
  HealthReason,
  ClusterReason,
  ReconcilerReason,
  ServiceReason,
  DashboardReason,
  FileReason,
} from "./reasons/index.js";
