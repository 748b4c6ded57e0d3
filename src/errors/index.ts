/**
 * src/errors: the one error shape of the control plane (a stable `reason`, a message for people,
 * terminal or transient), the reason catalogues of each concern, the message of anything thrown,
 * and the helpers messages share (showing untrusted text, guessing a mistyped name).
 */
export { ShardctlError, isShardctlError } from "./shardctl-error.js";
export { messageOf, messageWithCauseOf, jsonErrorOf } from "./message-of.js";
export { showText, quoteText, hasUnsafeChar, firstUnsafeChar, clipText, clipMessage, maxMessageChars } from "./show-text.js";
export { closestName, isNearLocal } from "./closest-name.js";
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
