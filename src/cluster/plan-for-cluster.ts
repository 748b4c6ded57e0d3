/**
 * The plan of one cluster definition, made the same way for the daemon and for every command:
 * probe the cluster's nodes when asked (free memory, accelerator, engine version: the daemon's budgets
 * are what the nodes report, capped by their declared memory), pin a Hub branch to its commit when
 * the files will be staged (so the plan and every node's files come from that one commit, however
 * the branch moves), inspect the model and plan.
 */
import type { NodeFacts, ModelProfile, ShardPlan } from "../planner/index.js";
import { planCluster } from "../planner/index.js";
import type { ClusterSpec, Settings } from "../spec/index.js";
import { resolveManifest, type Manifest } from "../staging/index.js";
import type { ClusterNodes } from "./cluster-nodes.js";
import { probeClusterNodes } from "./probe-cluster-nodes.js";
import { stagingSourceOf } from "./staging-source.js";

export interface PlannedCluster {
  profile: ModelProfile;
  plan: ShardPlan;
  /**
   * Whether the nodes were probed: "declared", the registry's memory alone; "probed", what the nodes
   * reported capped by the registry's memory. Each stage's `budgetSource` says which figure decided.
   */
  budgets: "declared" | "probed";
  /** What the nodes reported (empty when not probed). */
  facts: Record<string, NodeFacts>;
  /** The file list the plan was made from: a Hub branch pinned to its commit, for staging. */
  pinned?: Manifest;
}

export interface PlanForClusterOptions {
  /**
   * Probe these nodes: the stage nodes' budgets are what they report, capped by what they declare;
   * the coordinator's node is probed for the engine when a process of the engine serves there.
   * Default: declared memory, nothing probed.
   */
  probe?: ClusterNodes;
  /** Pin a Hub branch to its commit first (set when the plan's files are going to be staged). Default false. */
  pin?: boolean;
  /** Ends the nodes' probes when aborted (see ProbeClusterOptions); the plan then throws its reason. */
  signal?: AbortSignal;
}

export async function planForCluster(spec: ClusterSpec, settings: Settings, options: PlanForClusterOptions = {}): Promise<PlannedCluster> {
  const facts = options.probe === undefined ? {} : await probeClusterNodes(spec, options.probe, options.signal === undefined ? {} : { signal: options.signal });
  const pinned = options.pin === true && spec.model.source === "hub" ? await resolveManifest(stagingSourceOf(spec, settings)) : undefined;
  const { profile, plan } = await planCluster(
    spec,
    settings,
    facts,
    pinned === undefined ? undefined : { commit: pinned.commit, files: pinned.files.map((f) => f.path) },
  );
  return { profile, plan, budgets: options.probe === undefined ? "declared" : "probed", facts, ...(pinned === undefined ? {} : { pinned }) };
}

/**
 * How a plan's budgets are described to people: where they came from, and — for a plan of the
 * declared figures only — how the daemon's own plan differs (with distributed serving on it probes
 * the nodes, capping what they report by what they declare; off, it probes nothing either).
 */
export function describeBudgets(planned: Pick<PlannedCluster, "budgets">, settings: Pick<Settings, "distributed">): string {
  if (planned.budgets === "probed") return "what each node reports (free memory), capped by its declared memory: the rule the daemon plans with";
  return settings.distributed.enabled
    ? "declared memory only (nothing probed); the daemon plans with what each node reports (free memory), capped by its declared memory: run with --probe for that plan"
    : "declared memory only (nothing probed), as the daemon plans while [distributed] enabled = false";
}
