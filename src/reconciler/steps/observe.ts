/**
 * Observe what runs: the ledger's entry of this cluster and, when it is ours, its processes
 * (liveness, transport ports, the coordinator's /health). Only for a missing definition is the
 * rest of the directory looked at: the prune guard needs it.
 */
import { pathExists } from "../../files/index.js";
import { observeCluster } from "../../health/index.js";
import type { LedgerEntry } from "../../launch/index.js";
import { findClusterFiles } from "../../spec/index.js";
import type { Pass } from "../pass.js";
import type { Step } from "../run-step.js";

export const observe: Step = {
  name: "observe",
  action: "none",
  failure: "ObserveFailed",
  async run(pass) {
    const entry = await pass.ledger.read(pass.name);
    const ours = entry !== undefined && pass.world.owns(entry);
    // A suspended or invalid definition takes no action: its processes need no probing.
    const acting = pass.desired?.kind === "defined" && !pass.desired.suspend;
    if (entry !== undefined && ours && acting) pass.observation = await observeEntry(pass, entry);
    const absent = pass.desired?.kind === "absent" && entry !== undefined && ours;
    pass.entry = entry;
    pass.observed = {
      ...(entry === undefined ? {} : { entry }),
      ours,
      gone: pass.observation?.gone ?? [],
      dirExists: absent ? await pathExists(pass.world.dir) : true,
      definitions: absent ? (await findClusterFiles(pass.world.dir).catch(() => [] as string[])).length : 0,
      ownEntries: absent ? (await pass.world.ownEntries(pass.settings)).length : 0,
    };
  },
};

/** Probe the processes of a ledger entry; the result is also the stage cards of the status file. */
export async function observeEntry(pass: Pass, entry: LedgerEntry) {
  const { memory } = pass;
  const layers = memory.planned?.plan.stages.map((s) => s.layers);
  const observation = await observeCluster(entry, {
    nodeFor: (n) => pass.world.nodeFor(n, pass.settings),
    ...(layers === undefined ? {} : { layers }),
    ...(memory.observation === undefined ? {} : { previous: memory.observation }),
  });
  memory.observation = observation;
  return observation;
}
