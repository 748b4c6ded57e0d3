import { createHash } from "node:crypto";
import type { ShardPlan } from "../planner/index.js";
import { stableStringify, type ClusterSpec, type Settings } from "../spec/index.js";

/**
 * What the running processes were started from: the plan's node/layer split, the model, the engine,
 * the transport, the coordinator and the registry entries of the nodes involved. A revision that
 * changes none of these (a router weight, `suspend`, a comment-free reformat) is applied without a
 * restart; anything else replaces the cluster.
 */
export function launchIdentity(spec: ClusterSpec, settings: Settings, plan: ShardPlan): string {
  const nodeNames = [...spec.nodes, spec.coordinator.node];
  const subject = {
    model: spec.model,
    engine: spec.engine,
    transport: spec.transport,
    coordinator: spec.coordinator,
    split: plan.stages.map((s) => [s.node, s.layers[0], s.layers[1]]),
    nodes: nodeNames.map((n) => settings.nodes[n] ?? n),
  };
  return createHash("sha256").update(stableStringify(subject)).digest("hex");
}
