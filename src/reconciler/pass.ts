/**
 * One pass of one cluster: what its steps share. Filled in as the story goes: the definition
 * (read), what runs (observe), the decision, then whatever the acting steps produce.
 */
import type { ClusterObservation } from "../health/index.js";
import type { Ledger, LedgerEntry } from "../launch/index.js";
import type { ClusterSpec, Settings } from "../spec/index.js";
import type { StagedCluster } from "../cluster/index.js";
import { ShardctlError } from "../errors/index.js";
import type { ClusterMemory } from "./cluster-memory.js";
import type { DesiredState, NextAction, ObservedState } from "./next-action.js";
import type { ReconcilerWorld } from "./world.js";

export interface Pass {
  name: string;
  /** The definition file (it may not exist: then the cluster is pruned). */
  file: string;
  settings: Settings;
  ledger: Ledger;
  memory: ClusterMemory;
  world: ReconcilerWorld;
  /** When the pass began (ms since the epoch). */
  startedAt: number;
  /** Each step run so far, for the summary at the end of the pass. */
  steps: Array<{ name: string; ms: number; failed?: boolean }>;

  desired?: DesiredState;
  /** The definition that parsed this pass and its revision. */
  spec?: ClusterSpec;
  revision?: string;
  /** The ledger's entry of this cluster name, if any (ours or not: `observed.ours` says). */
  entry?: LedgerEntry;
  observed?: ObservedState;
  observation?: ClusterObservation;
  action?: NextAction;
  staged?: StagedCluster;
  /** The entry of the launch this pass made. */
  launched?: LedgerEntry;
  /** Aborted, with a LaunchCalledOff, once this pass's launch is called off (see call-off.ts). */
  callOff?: AbortSignal;
  /**
   * Give the work queue's slot back while the pass stages or waits on engines: passes of other
   * clusters go on meanwhile. Absent outside the daemon's queue.
   */
  stepAside?: () => void;
}

/** The definition of a pass that has read one; steps after the decision rely on it. */
export function definitionOf(pass: Pass): { spec: ClusterSpec; revision: string } {
  if (pass.spec === undefined || pass.revision === undefined) throw new ShardctlError("InternalError", `${pass.name}: a step needs the definition before it was read`);
  return { spec: pass.spec, revision: pass.revision };
}

/** The revision conditions describe: this pass's, or the last one that parsed. */
export function revisionOf(pass: Pass): string {
  return pass.revision ?? pass.memory.lastGood?.revision ?? "";
}

/**
 * What the pass's launch replaces, when it replaces a launch: whole (running, nothing gone), or
 * broken or half-done (a process gone, a launch or a teardown left unfinished).
 */
export function replacing(pass: Pass): "whole" | "broken" | undefined {
  const replace = pass.action?.kind === "launch" ? pass.action.replace : undefined;
  if (replace === undefined) return undefined;
  return replace.gone.length > 0 || replace.phase !== "running" ? "broken" : "whole";
}
