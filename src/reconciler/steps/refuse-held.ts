/**
 * What other clusters of this daemon hold that a launch needs for itself: its router backend name
 * and its share of its nodes' declared memory. A launch they refuse starts nothing and counts
 * nothing (see launch.ts).
 *
 * Looked at twice. First, before the pass says it launches (a stall lifted, "launching" written):
 * a cluster woken while what it waits on is still held is refused as it was, and its status does
 * not flip to launching and back at every try. Then again in the launch step, where the look and
 * the claim run with nothing awaited between them: another cluster may have taken a name or memory
 * while this one staged. A running cluster's router name changed in place, without a launch, is
 * looked at by the adopt step the same way.
 */
import { routerBackendNameOf } from "../../cluster/index.js";
import { ShardctlError } from "../../errors/index.js";
import type { LedgerEntry } from "../../launch/index.js";
import { definitionOf, type Pass } from "../pass.js";
import type { Step } from "../run-step.js";

export const refuseHeld: Step = {
  name: "refuse-held",
  action: "launch",
  // What else fails here is a look at the ledger (an EMFILE, say).
  failure: "ObserveFailed",
  async run(pass) {
    const { spec } = definitionOf(pass);
    const planned = pass.memory.planned;
    if (planned === undefined) return;
    refuseTakenBackend(routerBackendNameOf(spec, pass.settings), await othersInLedger(pass), pass.world.launchingBackends, pass.name);
    pass.world.memoryClaims.refuseTaken(pass.name, planned.plan, pass.settings, spec.plan.headroom);
  },
};

/**
 * RouterBackendTaken when `backend` is the router entry of another cluster: one that runs (in
 * `others`, the ledger's entries of the other clusters) or one being launched (`launching`: backend
 * name → cluster). A router backend is one entry, found by its name: registering this cluster under
 * a name a running one holds would replace that one's address (its traffic would come here), and
 * either teardown would remove the entry both count on. The cluster that holds it keeps it.
 */
export function refuseTakenBackend(backend: string | undefined, others: readonly LedgerEntry[], launching: ReadonlyMap<string, string>, self: string): void {
  if (backend === undefined) return;
  const runningHolder = others.find((e) => e.routerBackend === backend)?.cluster;
  const launchingHolder = launching.get(backend) === self ? undefined : launching.get(backend);
  const holder = runningHolder ?? launchingHolder;
  if (holder === undefined) return;
  throw new ShardctlError(
    "RouterBackendTaken",
    `[router] backend "${backend}" is the router entry of cluster ${holder}, which ${runningHolder !== undefined ? "runs" : "is being launched"}: registering this cluster under it would send ${holder}'s traffic here, and either teardown would remove the entry of both; give this cluster its own [router] backend${runningHolder !== undefined ? "" : " (retried meanwhile: that launch may fail and let it go)"}`,
    // One that runs keeps it: stalled until a change. One being launched may fail and let it go.
    { terminal: runningHolder !== undefined },
  );
}

/** The ledger's entries of the clusters other than the pass's. */
export async function othersInLedger(pass: Pass): Promise<LedgerEntry[]> {
  return (await pass.ledger.list()).filter((e) => e.cluster !== pass.name);
}
