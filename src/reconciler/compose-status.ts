/**
 * The status file of a cluster, composed from what the daemon remembers and last observed. Only
 * what people and CI need, no secrets: the transport token and hub token never appear here.
 */
import { basename } from "node:path";
import type { Settings } from "../spec/index.js";
import type { ClusterMemory } from "./cluster-memory.js";
import type { ClusterStatus, Health } from "./status/index.js";

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
  const plan = memory.planned?.plan;
  const observation = memory.observation;
  const entryUrl = observation?.coordinator?.url;
  const routerBackend = spec?.router.register === true ? spec.router.backend : undefined;
  const registered = memory.conditions.find((c) => c.type === "Registered")?.status === "True";
  return {
    cluster: name,
    file: basename(file),
    observedRevision: memory.lastGood?.revision ?? "",
    ...(memory.gitCommit?.commit === undefined ? {} : { gitCommit: memory.gitCommit.commit }),
    desired: spec?.desired ?? "running",
    ...(spec === undefined ? {} : { model: spec.model.id }),
    health: report.health,
    conditions: memory.conditions,
    ...(plan === undefined
      ? {}
      : {
          plan: {
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
              fit: s.fit === null ? null : Math.round(s.fit * 10_000) / 10_000,
            })),
            warnings: plan.warnings.map((w) => ({ reason: w.reason, message: w.message })),
          },
        }),
    staging: memory.staging,
    stages: observation?.stages ?? [],
    ...(observation?.coordinator === undefined ? {} : { coordinator: observation.coordinator }),
    ...(routerBackend === undefined || settings?.router.kind === "none" ? {} : { router: { backend: routerBackend, url: entryUrl ?? "", registered } }),
    timeline: memory.timeline,
    ...(memory.restarts === undefined || settings === undefined
      ? {}
      : { restarts: { revision: memory.restarts.revision, count: memory.restarts.count, budget: settings.daemon.restartBudget, evidence: memory.restarts.evidence } }),
    ...(memory.lastError === undefined ? {} : { lastError: memory.lastError }),
    history: memory.history,
  };
}
