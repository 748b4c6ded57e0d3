/**
 * The plan of one cluster definition, made the same way for the daemon and for every command:
 * probe the stage nodes when asked (free memory, accelerator, engine version: the daemon's
 * budgets), pin a Hub branch to its commit when the files will be staged (so the plan and every
 * node's files come from that one commit, however the branch moves), inspect the model and plan.
 */
import type { NodeFacts, ModelProfile, ShardPlan } from "../planner/index.js";
import { planCluster } from "../planner/index.js";
import type { ClusterSpec, Settings } from "../spec/index.js";
import { resolveManifest, type Manifest } from "../staging/index.js";
import type { NodeAccess } from "../nodes/index.js";
import { probeClusterNodes } from "./probe-cluster-nodes.js";
import { stagingSourceOf } from "./staging-source.js";

export interface PlannedCluster {
  profile: ModelProfile;
  plan: ShardPlan;
  /** Where the stage budgets came from: the registry's declared memory, or what the nodes reported. */
  budgets: "declared" | "probed";
  /** What the nodes reported (empty when not probed). */
  facts: Record<string, NodeFacts>;
  /** The file list the plan was made from: a Hub branch pinned to its commit, for staging. */
  pinned?: Manifest;
}

export interface PlanForClusterOptions {
  /** Probe these stage nodes (in stage order) and budget with what they report. Default: declared memory. */
  probe?: readonly NodeAccess[];
  /** Pin a Hub branch to its commit first (set when the plan's files are going to be staged). Default false. */
  pin?: boolean;
}

export async function planForCluster(spec: ClusterSpec, settings: Settings, options: PlanForClusterOptions = {}): Promise<PlannedCluster> {
  const facts = options.probe === undefined ? {} : await probeClusterNodes(spec, [...options.probe]);
  const pinned = options.pin === true && spec.model.source === "hub" ? await resolveManifest(stagingSourceOf(spec, settings)) : undefined;
  const { profile, plan } = await planCluster(spec, settings, facts, pinned?.commit);
  return { profile, plan, budgets: options.probe === undefined ? "declared" : "probed", facts, ...(pinned === undefined ? {} : { pinned }) };
}

/** How a plan's budgets are described to people. */
export function describeBudgets(planned: Pick<PlannedCluster, "budgets">): string {
  return planned.budgets === "probed" ? "probed free memory of each node" : "declared memory in the settings (--probe for what the nodes report, as the daemon plans)";
}
