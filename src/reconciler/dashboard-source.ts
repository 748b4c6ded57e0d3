/**
 * What the daemon gives its dashboard: the reconciler's status feed, the status files of its
 * directory, the same reconcile request `shardctl reconcile` makes, and plan previews made the way
 * the plan step makes them (planForCluster with the daemon's current settings), writing nothing.
 */
import { basename, join } from "node:path";
import { daemonPlanOptions, nodesOfCluster, planForCluster } from "../cluster/index.js";
import type { DashboardSource, PlanPreview } from "../dashboard/index.js";
import { isShardctlError, messageOf } from "../errors/index.js";
import { pathExists } from "../files/index.js";
import type { NodePool } from "../nodes/index.js";
import { findClusterFiles, formatIssue, loadSettings, parseCluster } from "../spec/index.js";
import { planStatusOf } from "./compose-status.js";
import { dropReconcileRequest, requestTaken } from "./reconcile-request.js";
import type { Reconciler } from "./reconciler.js";
import { readStatus, statusFileFor, type ClusterStatus } from "./status/index.js";

export interface DashboardSourceOptions {
  /** The watched directory (absolute). */
  dir: string;
  settingsFile: string;
  reconciler: Reconciler;
  pool: NodePool;
  /** The state directory the daemon started with, where it takes reconcile requests (whatever the settings file says now). */
  stateDir: string;
  /** How long the daemon gets to take a reconcile request, ms. Default 15 000 (as `shardctl reconcile`). */
  requestDeadlineMs?: number;
}

export function dashboardSource(options: DashboardSourceOptions): DashboardSource {
  const { dir, settingsFile, reconciler, pool } = options;
  return {
    feed: reconciler.feed,
    readStatuses: async () => {
      const statuses = await Promise.all((await findClusterFiles(dir).catch(() => [])).map((f) => readStatus(statusFileFor(f)).catch(() => undefined)));
      return statuses.filter((s): s is ClusterStatus => s !== undefined);
    },
    clusterNames: async () => (await findClusterFiles(dir).catch(() => [])).map((f) => basename(f, ".toml")),
    hasCluster: (name) => pathExists(join(dir, `${name}.toml`)),
    requestReconcile: async (name) => requestTaken(await dropReconcileRequest(options.stateDir, name), options.requestDeadlineMs ?? 15_000),
    previewPlan: async (text, name, { probe }) => {
      const settings = await loadSettings(settingsFile);
      // Planned as if it were clusters/<name>.toml: relative paths resolve as for a committed definition.
      const file = join(dir, `${name}.toml`);
      const parsed = parseCluster(text, file, settings);
      if (!parsed.ok) return { cluster: name, feasible: false, errors: [], issues: parsed.issues.map((i) => formatIssue({ ...i, file: basename(file) })) };
      const spec = parsed.value;
      try {
        // "Probe" asks for the daemon's own budgets: what it would plan with (probed only while distributed serving is on).
        const planned = await planForCluster(spec, settings, probe ? daemonPlanOptions(settings, () => nodesOfCluster(spec, settings, pool), { pin: false }) : {});
        const { plan } = planned;
        return {
          cluster: spec.name,
          feasible: plan.feasible,
          plan: planStatusOf(planned),
          model: { source: plan.model.source, family: plan.model.family, layers: plan.model.layers, dtype: plan.model.dtype },
          errors: plan.errors.map((e) => ({ reason: e.reason, message: e.message })),
          issues: [],
        } satisfies PlanPreview;
      } catch (error) {
        if (!isShardctlError(error)) throw error;
        return { cluster: spec.name, feasible: false, errors: [{ reason: error.reason, message: messageOf(error) }], issues: [] };
      }
    },
  };
}
