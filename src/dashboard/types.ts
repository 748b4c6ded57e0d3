/**
 * What the dashboard serves and what the daemon hands it. The dashboard has no state of its own:
 * every answer comes from the daemon's statuses (the status files, and the reconciler's feed that
 * publishes each status as it is composed), the daemon's planner and its requests directory.
 */
import type { ClusterStatus, StatusFeed } from "../reconciler/index.js";
import type { PlanPreviewView, StatusView } from "./web/status-types.js";

export type PlanStatus = NonNullable<ClusterStatus["plan"]>;

/** `POST /api/plan`: the plan of a definition that need not exist on disk, as the status file would show it. */
export interface PlanPreview {
  /** The name the definition was planned as (`?name=`, default "preview"). */
  cluster: string;
  /** The definition parsed and the plan has no error. */
  feasible: boolean;
  /** Absent when the definition is invalid or the model could not be inspected. */
  plan?: PlanStatus;
  /** The model as the planner saw it. */
  model?: { source: string; family: string; layers: number; dtype: string };
  /** Why the plan is infeasible or could not be made: stable reasons. */
  errors: Array<{ reason: string; message: string }>;
  /** Problems of the definition itself, each as `file:line:col: path: message`. */
  issues: string[];
}

/** The daemon's side of the dashboard. */
export interface DashboardSource {
  /** Every status as it is composed (each write, staging progress, a death as it is seen). */
  feed: Pick<StatusFeed, "on" | "off" | "snapshot" | "failedFiles">;
  /** The status files on disk, for clusters the daemon has not composed a status of since it started. */
  readStatuses(): Promise<ClusterStatus[]>;
  /** The definitions in the watched directory, by name (whether or not their status file reads). */
  clusterNames(): Promise<string[]>;
  /** Whether `name` is a definition in the watched directory. */
  hasCluster(name: string): Promise<boolean>;
  /** The request `shardctl reconcile <name>` makes; true once the daemon took it, false on its deadline. */
  requestReconcile(name: string): Promise<boolean>;
  /** Plan a definition's text with the daemon's settings and planner; writes nothing. */
  previewPlan(text: string, name: string, options: { probe: boolean }): Promise<PlanPreview>;
}

/** Compiles only when T fits U: the page's view types (web/status-types.ts) must accept what the daemon serves. */
type Fits<T extends U, U> = T;
export type PageReadsTheStatus = Fits<ClusterStatus, StatusView>;
export type PageReadsThePreview = Fits<PlanPreview, PlanPreviewView>;
