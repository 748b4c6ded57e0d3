/**
 * Every reason a ShardctlError (or a stall, a death, a plan message) can carry, one catalogue per
 * concern. Reasons are stable: status conditions, scripts and tests match on them.
 */
import type { ClusterReason } from "./cluster.js";
import type { DashboardReason } from "./dashboard.js";
import type { FileReason } from "./files.js";
import type { HealthReason } from "./health.js";
import type { LaunchReason } from "./launch.js";
import type { NodeReason } from "./nodes.js";
import type { PlannerReason } from "./planner.js";
import type { ReconcilerReason } from "./reconciler.js";
import type { RouterReason } from "./router.js";
import type { ServiceReason } from "./service.js";
import type { SpecReason } from "./spec.js";
import type { StagingReason } from "./staging.js";

export type {
  ClusterReason,
  DashboardReason,
  FileReason,
  HealthReason,
  LaunchReason,
  NodeReason,
  PlannerReason,
  ReconcilerReason,
  RouterReason,
  ServiceReason,
  SpecReason,
  StagingReason,
};
export type { LaunchStepReason } from "./launch.js";

export type Reason =
  | SpecReason
  | PlannerReason
  | NodeReason
  | StagingReason
  | LaunchReason
  | RouterReason
  | HealthReason
  | ClusterReason
  | ReconcilerReason
  | DashboardReason
  | ServiceReason
  | FileReason;
