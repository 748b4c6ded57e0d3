/**
 * A node's declared memory (`[nodes.<name>] memory`, and `memory_limit`) is the operator's word on
 * what models may have of that machine, whichever clusters run there. Each plan is budgeted alone,
 * from what its nodes report free at that moment capped by their declared memory, so clusters
 * planned together (one checkout adding several), or one planned beside a cluster not loaded yet,
 * could each fit a node that cannot hold them all. A launch therefore claims its stages' planned
 * bytes on each node before it starts anything, and is refused (NodeMemoryTaken, retried with
 * back-off, not counted) when the claims of the clusters that run or launch there and its own would
 * pass the node's declared figure ÷ the plan's headroom. Nodes without a declared figure are left
 * to their probes. Claims live in the daemon's memory: set by a launch (with nothing awaited between
 * the look and the claim) or an adoption, dropped when the launch fails or what runs is torn down.
 * A launch records its claim in the ledger, from which a restarted daemon takes the claims of what
 * runs before its first pass (a cluster not adopted yet holds its nodes' memory all the same).
 */
import { ShardctlError } from "../errors/index.js";
import { budgetOf, formatBytes, type ShardPlan } from "../planner/index.js";
import type { Settings } from "../spec/index.js";

export class NodeMemoryClaims {
  /** Per cluster, the bytes its plan puts on each node. */
  private readonly claims = new Map<string, Map<string, number>>();

  /**
   * Claim `plan`'s bytes for `cluster` (replacing its earlier claim), or throw NodeMemoryTaken
   * naming the node, its figure and the clusters that hold it. `headroom`: the plan's.
   */
  claim(cluster: string, plan: ShardPlan, settings: Settings, headroom: number): Record<string, number> {
    this.refuseTaken(cluster, plan, settings, headroom);
    const wanted = bytesByNode(plan);
    this.claims.set(cluster, wanted);
    return Object.fromEntries(wanted);
  }

  /** NodeMemoryTaken when `claim` would refuse `plan` now; claims nothing. */
  refuseTaken(cluster: string, plan: ShardPlan, settings: Settings, headroom: number): void {
    for (const [node, bytes] of bytesByNode(plan)) {
      const entry = settings.nodes[node];
      // The plans' own rule on the declared figures alone (what a node reports free is a moment's reading).
      const cap = budgetOf(
        {
          name: node,
          ...(entry?.memory === undefined ? {} : { memoryBytes: entry.memory }),
          ...(entry?.memoryLimit === undefined ? {} : { memoryLimitBytes: entry.memoryLimit }),
        },
        headroom,
      )?.bytes;
      if (cap === undefined) continue;
      const declared = Math.min(entry?.memory ?? Infinity, entry?.memoryLimit ?? Infinity);
      const holders = [...this.claims].flatMap(([other, byNode]) => (other === cluster || !byNode.has(node) ? [] : [{ other, bytes: byNode.get(node)! }]));
      const held = holders.reduce((sum, h) => sum + h.bytes, 0);
      if (held + bytes <= cap) continue;
      const named = holders.map((h) => `cluster ${h.other} ${formatBytes(h.bytes)}`).join(", ");
      throw new ShardctlError(
        "NodeMemoryTaken",
        `node ${node} has ${formatBytes(cap)} for models (its declared ${formatBytes(declared)} ÷ headroom ${headroom}), of which ${named} hold ${formatBytes(held)}: this cluster's stages there need ${formatBytes(bytes)} more; retried with back-off (tried again once one of them stops or moves), or raise [nodes.${node}] memory if the machine holds them all`,
        { terminal: false },
      );
    }
  }

  /** Record what an adopted launch holds, unchecked: it runs already. */
  hold(cluster: string, plan: ShardPlan): void {
    this.claims.set(cluster, bytesByNode(plan));
  }

  /** Record what a launch found in the ledger holds (its recorded claim), unchecked: it runs already. */
  holdRecorded(cluster: string, bytesByNode: Record<string, number>): void {
    this.claims.set(cluster, new Map(Object.entries(bytesByNode)));
  }

  /** What runs for `cluster` is gone (torn down, or its launch failed): its claim with it. */
  release(cluster: string): void {
    this.claims.delete(cluster);
  }
}

/** A plan's bytes (weights and KV) on each of its nodes. */
function bytesByNode(plan: ShardPlan): Map<string, number> {
  const byNode = new Map<string, number>();
  for (const stage of plan.stages) byNode.set(stage.node, (byNode.get(stage.node) ?? 0) + stage.totalBytes);
  return byNode;
}
