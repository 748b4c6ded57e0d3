/**
 * What a pass leaves to watch for a node's return (see watch.ts): the nodes of leftovers its
 * teardown could not reach (silent from the start: the ledger marks them so), and, when the pass
 * failed as NodeUnreachable (probing, staging, launching), every node its definition uses (which
 * one did not answer is not known: each counts once it has missed rounds).
 */
import type { LedgerEntry } from "../../launch/index.js";
import type { NodeAccess } from "../../nodes/index.js";
import type { NodeWatch } from "./watch.js";

export interface PassLeftBehind {
  /** The cluster's ledger entry when it is this daemon's; undefined otherwise. */
  entry: LedgerEntry | undefined;
  /** The pass failed because a node did not answer. */
  failedUnreachable: boolean;
  /** The nodes the pass's definition uses (stages and coordinator), each once. */
  nodesUsed: readonly NodeAccess[];
  /** A node of the ledger by name; throws for one no longer in the settings. */
  nodeFor: (node: string) => NodeAccess;
  /** A node's settings, in the key: a node whose address was corrected gets a watch over its new access. */
  nodeSettings: (node: string) => unknown;
}

export function whatToWatch(left: PassLeftBehind): NodeWatch | undefined {
  const leftovers = unreachableLeftovers(left.entry, left.nodeFor);
  const silent = new Map(leftovers.map((p) => [p.node, left.nodeFor(p.node)]));
  const used = left.failedUnreachable ? left.nodesUsed.filter((n) => !silent.has(n.config.name)) : [];
  const nodes = [...silent.values(), ...used];
  if (nodes.length === 0) return undefined;
  const key = [
    ...leftovers.map((p) => `leftover ${p.node}:${p.pid}:${p.startTime}`),
    ...nodes.map((n) => `node ${n.config.name}:${JSON.stringify(left.nodeSettings(n.config.name) ?? null)}`),
  ].join(",");
  return { key, nodes, silentAtStart: [...silent.keys()] };
}

/** The leftovers of a teardown whose node did not answer, on nodes still in the settings. */
function unreachableLeftovers(entry: LedgerEntry | undefined, nodeFor: (node: string) => NodeAccess): LedgerEntry["processes"] {
  if (entry?.phase !== "tearing-down") return [];
  return entry.processes.filter((p) => p.unreachable === true && isKnown(p.node, nodeFor));
}

/** A node removed from the settings cannot be asked: its leftovers wait for it to be added back. */
function isKnown(node: string, nodeFor: (node: string) => NodeAccess): boolean {
  try {
    nodeFor(node);
    return true;
  } catch {
    return false;
  }
}
