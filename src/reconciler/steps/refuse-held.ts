/**
 * What other clusters of this daemon hold that a launch needs for itself: its router backend name,
 * its share of its nodes' declared memory, and free ports of its transport range. A launch they
 * refuse starts nothing, stages nothing and counts nothing (see launch.ts); a serving cluster
 * edited onto what they hold keeps serving its revision meanwhile.
 *
 * Looked at twice. First, before the pass says it launches (a stall lifted, "launching" written):
 * a cluster woken while what it waits on is still held is refused as it was, and its status does
 * not flip to launching and back at every try. Then again in the launch step, where the look and
 * the claim run with nothing awaited between them: another cluster may have taken a name or memory
 * while this one staged. A running cluster's router name changed in place, without a launch, is
 * looked at by the adopt step the same way.
 */
import { launchAddressesOf, routerBackendNameOf } from "../../cluster/index.js";
import { isShardctlError, ShardctlError } from "../../errors/index.js";
import { allocatePorts, ownHttpListener, portsHeldBy, transportPortRequests, type LedgerEntry } from "../../launch/index.js";
import { definitionOf, replacing, type Pass } from "../pass.js";
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
    const others = await othersInLedger(pass);
    refuseTakenBackend(routerBackendNameOf(spec, pass.settings), others, pass.world.launchingBackends, pass.name);
    pass.world.memoryClaims.refuseTaken(pass.name, planned.plan, pass.settings, spec.plan.headroom);
    await refuseFilledRange(pass, others);
  },
};

/**
 * PortRangeExhausted when the ports other clusters hold in the transport range leave too few on an
 * address for this launch's processes there (a stage's transport port each, and the coordinator's
 * control port). Only what the ledger says is looked at: a port another program holds is found by
 * the launch, which reads every node's socket table as it chooses. What runs of this cluster is
 * not counted as holding anything: a replacement frees its ports before the launch chooses. What
 * runs broken or half-done is not looked for here: it is torn down first whatever the range's fate,
 * and the launch after it finds the range full itself.
 */
async function refuseFilledRange(pass: Pass, others: readonly LedgerEntry[]): Promise<void> {
  if (replacing(pass) === "broken") return;
  const { spec } = definitionOf(pass);
  const range = spec.transport.portRange;
  const held = portsHeldBy(others);
  // Nothing in the range is held: no address of the launch needs resolving.
  if (!held.some((h) => h.port >= range.first && h.port <= range.last)) return;
  const nodes = pass.world.nodesOf(spec, pass.settings);
  // Addresses that cannot be resolved now are the launch's to report.
  const addresses = await launchAddressesOf(spec, nodes).catch(() => undefined);
  if (addresses === undefined) return;
  const requests = transportPortRequests(
    nodes.stages.map((node, i) => ({ index: i, nodeName: node.config.name, host: addresses.stageHosts[i]!, node })),
    addresses.hasCoordinator ? { nodeName: nodes.coordinator.config.name, host: addresses.controlHost, node: nodes.coordinator } : undefined,
  );
  held.push(ownHttpListener(addresses.httpHost, spec.coordinator.port));
  try {
    await allocatePorts(range, requests, held, () => Promise.resolve(false));
  } catch (error) {
    if (!isShardctlError(error, "PortRangeExhausted")) throw error;
    const serving = replacing(pass) === "whole" ? "; the running revision keeps serving meanwhile" : "";
    throw new ShardctlError("PortRangeExhausted", `${error.message}${serving}; retried with back-off, and as soon as one of them goes`, {
      terminal: false,
      cause: error,
    });
  }
}

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
