/**
 * Tear down what runs at another launch identity, broken, or left half-launched or half-torn-down,
 * before launching (or before stalling on an exhausted restart budget). Ready is withdrawn first; a
 * death this pass found before the health monitor did is recorded as the monitor would have. A
 * registered model that comes back with the new launch is marked as coming back first, so clients
 * are told 503 with Retry-After while it is replaced, not 404.
 */
import type { LedgerEntry } from "../../launch/index.js";
import { definitionOf, type Pass } from "../pass.js";
import { deathFoundByPass } from "../death-found-by-pass.js";
import { markComingBack } from "../coming-back.js";
import { explainDeath, recordDeath } from "../record-death.js";
import type { Step } from "../run-step.js";
import { budgetSpent, clearRuntime, setConditions } from "../verdicts.js";
import { foldersOfProcesses, removeRunFolders, type RunFolderPlace } from "./remove-run-folders.js";
import { tearDown } from "./stop.js";

export const replace: Step = {
  name: "replace",
  yieldsToCallOff: true,
  action: "stop",
  failure: "TeardownFailed",
  async run(pass) {
    const { revision } = definitionOf(pass);
    const entry = pass.entry;
    if (entry === undefined) return;
    const gone = pass.observed?.gone ?? [];
    // A pass that finds a process of the running launch gone before the monitor did records the death itself.
    const death = entry.phase === "running" && gone.length > 0 ? await deathFoundByPass(pass, entry, gone) : undefined;
    const recorded = death === undefined ? undefined : recordDeath(pass, entry, death);
    // Alongside the teardown: the record names a silent peer before the teardown has ended.
    const explained = explainDeath(pass, entry, recorded, "at-death").catch(() => undefined);
    const message = `tearing down revision ${entry.revision.slice(0, 12)} (${entry.phase}${gone.length > 0 ? `; ${gone.join(", ")} gone` : ""})`;
    // What is left of a launch that already stopped serving (a death, a failed launch, a teardown
    // retried while a node is cut off) is no replacement: Ready keeps saying why it is down, rather
    // than flipping to Replacing at every retry.
    const leftover = entry.phase !== "running" || death !== undefined;
    const readyDown = pass.memory.conditions.some((c) => c.type === "Ready" && c.status === "False");
    setConditions(pass.memory, revision, {
      ...(leftover && readyDown ? {} : { Ready: { status: "False", reason: "Replacing", message } }),
      Reconciling: { status: "True", reason: leftover ? "TearingDown" : "Replacing", message },
    });
    // Said in the status file before anything is stopped or the router is told: the teardown can
    // wait out grace periods or an unreachable node, and Ready must not stand meanwhile.
    if (death === undefined) {
      // A teardown tried again (a node that did not answer) is still the cluster being taken down:
      // Unhealthy, as the failed try said, not Progressing between two tries.
      const health = budgetSpent(pass.memory) ? "Stalled" : entry.phase === "tearing-down" ? "Unhealthy" : "Progressing";
      await pass.world.writeStatus(pass.name, pass.memory, { action: "stop", result: "waiting", reason: leftover ? "TearingDown" : "Replacing", health }, pass.settings);
    }
    if (death === undefined && pass.action?.kind === "launch") await markReplacedComingBack(pass);
    await tearDown(pass);
    await explained;
    await explainDeath(pass, entry, recorded, "after-teardown").catch(() => undefined);
    // After the evidence is read: it comes from the logs in those folders.
    await removeRunFolders(pass, foldersLeftBehind(pass, entry), "a cluster moved off the node");
    clearRuntime(pass.memory, revision);
  },
};

/**
 * The run folders of the torn-down launch on nodes the revision about to launch does not use (one
 * no longer in the registry cannot be asked: its folder stays).
 */
function foldersLeftBehind(pass: Pass, entry: LedgerEntry): RunFolderPlace[] {
  const { spec } = definitionOf(pass);
  const used = new Set([...spec.nodes, spec.coordinator.node]);
  return foldersOfProcesses(entry.processes.filter((p) => !used.has(p.node))).flatMap((f) => {
    try {
      return [{ ...f, node: pass.world.nodeFor(f.nodeName, pass.settings), sweep: false }];
    } catch {
      return [];
    }
  });
}

/** Say the served model is coming back (the router answers it 503 + Retry-After) when the new launch registers it again. */
async function markReplacedComingBack(pass: Pass): Promise<void> {
  const { spec } = definitionOf(pass);
  if (pass.entry?.routerBackend === undefined || !spec.router.register) return;
  // Kept by the pass (renewed while it stages and launches) until the new launch is registered.
  pass.memory.comingBack = spec.model.id;
  await markComingBack(pass, spec.model.id);
}
