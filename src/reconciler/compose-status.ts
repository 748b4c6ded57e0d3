/**
 * The status file of a cluster, composed from what the daemon remembers and last observed. Only
 * what people and CI need, no secrets: the transport token and hub token never appear here.
 */
import { basename } from "node:path";
import type { Settings } from "../spec/index.js";
import { clipMessage } from "../errors/index.js";
import type { ClusterMemory } from "./cluster-memory.js";
import type { PlannedCluster } from "../cluster/index.js";
import type { ClusterStatus, Health } from "./status/index.js";

type PlanStatus = NonNullable<ClusterStatus["plan"]>;

/** What a pass concluded. */
export interface PassReport {
  action: string;
  result: "success" | "waiting" | "failed" | "stalled";
  reason?: string;
  health: Health;
  /** The cluster was pruned: there is no status file to write. */
  pruned?: boolean;
}

export function composeStatus(name: string, file: string, memory: ClusterMemory, report: PassReport, settings: Settings | undefined): ClusterStatus {
  const spec = memory.lastGood?.spec;
  const observation = memory.observation;
  const entryUrl = observation?.coordinator?.url;
  // The name what runs is registered under (a rename the daemon refused leaves the old one), else the definition's.
  const routerBackend = spec?.router.register === true ? (memory.supervision?.entry.routerBackend ?? spec.router.backend) : undefined;
  const registered = memory.conditions.find((c) => c.type === "Registered")?.status === "True";
  return {
    cluster: name,
    file: basename(file),
    ...(memory.definitionRemoved === true ? { definitionRemoved: true as const } : {}),
    // Until a definition parses (a daemon started beside an invalid edit), the revision the last
    // status named: what it describes still runs, and a later daemon recalls its kept definition by it.
    observedRevision: memory.lastGood?.revision ?? memory.status?.observedRevision ?? "",
    ...(memory.gitCommit?.commit === undefined ? {} : { gitCommit: memory.gitCommit.commit }),
    ...(memory.gitHead?.commit === undefined ? {} : { gitHead: memory.gitHead.commit }),
    desired: spec?.desired ?? "running",
    ...(spec === undefined ? {} : { model: spec.model.id, nodes: [...spec.nodes] }),
    ...modelCommitOf(memory),
    ...servingOf(memory),
    health: report.health,
    // Messages are cut to a bounded length: each quotes what others wrote (an engine's version
    // line, its log), and a status file too large for `status` and `wait` to read says nothing.
    conditions: memory.conditions.map((c) => ({ ...c, message: clipMessage(c.message) })),
    ...planOf(memory),
    staging: memory.staging,
    stages: observation?.stages ?? [],
    ...(observation?.coordinator === undefined ? {} : { coordinator: observation.coordinator }),
    ...(routerBackend === undefined || settings?.router.kind === "none" ? {} : { router: { backend: routerBackend, url: entryUrl ?? "", registered } }),
    timeline: memory.timeline,
    ...(memory.restarts === undefined || settings === undefined
      ? {}
      : {
          restarts: {
            revision: memory.restarts.revision,
            count: memory.restarts.count,
            budget: settings.daemon.restartBudget,
            evidence: memory.restarts.evidence.map((e) => ({ ...e, message: clipMessage(e.message) })),
          },
        }),
    ...(memory.lastError === undefined ? {} : { lastError: { ...memory.lastError, message: clipMessage(memory.lastError.message) } }),
    history: memory.history,
  };
}

/** The model commit of the launch that runs (watched, and not dead): which weights answer. */
function modelCommitOf(memory: ClusterMemory): { modelCommit?: string } {
  const running = memory.supervision?.entry;
  if (running?.modelCommit === undefined || memory.deathRecordedFor === running.startedAt) return {};
  return { modelCommit: running.modelCommit };
}

/**
 * What is watched running at another revision than the definition's (an earlier one kept serving
 * while the new one is staged or refused): said, or the status's model and revision would be taken
 * for what answers.
 */
function servingOf(memory: ClusterMemory): { serving?: { revision: string; model: string } } {
  const running = memory.supervision?.entry;
  const revision = memory.lastGood?.revision ?? memory.status?.observedRevision;
  if (running?.model === undefined || revision === undefined || running.revision === revision) return {};
  // Dead, being torn down: it serves nothing any more.
  if (memory.deathRecordedFor === running.startedAt) return {};
  return { serving: { revision: running.revision, model: running.model } };
}

/**
 * The plan of the revision: the daemon's, else the one the last status showed at the same revision
 * (a daemon restarted while a node cannot be probed watches what runs before it can plan again).
 */
function planOf(memory: ClusterMemory): { plan?: PlanStatus } {
  if (memory.planned !== undefined) return { plan: planStatusOf(memory.planned) };
  const previous = memory.status;
  return previous?.plan !== undefined && previous.observedRevision === memory.lastGood?.revision ? { plan: previous.plan } : {};
}

/** A plan as the status file (and the dashboard's plan preview) shows it. */
export function planStatusOf(planned: Pick<PlannedCluster, "plan">): PlanStatus {
  const { plan } = planned;
  return {
    strategy: plan.strategy,
    feasible: plan.feasible,
    stages: plan.stages.map((s) => ({
      index: s.index,
      node: s.node,
      layers: s.layers,
      weightBytes: s.weightBytes,
      kvBytes: s.kvBytes,
      totalBytes: s.totalBytes,
      budgetBytes: s.budgetBytes === null ? null : Math.floor(s.budgetBytes),
      budgetSource: s.budgetSource,
      fit: s.fit === null ? null : Math.round(s.fit * 10_000) / 10_000,
    })),
    warnings: plan.warnings.map((w) => ({ reason: w.reason, message: clipMessage(w.message) })),
  };
}
