/**
 * The definition is gone: tear down what this daemon launched for it and remove its run folders on
 * the nodes (launch files, token, engine logs: nothing would ever remove them), then the last valid
 * definition the state directory kept and the status file (last, so CI reading it sees the
 * teardown finish). With nothing of ours running there is only what the daemon kept to remove.
 */
import { rm } from "node:fs/promises";
import { findClusterFiles, loadCluster } from "../../spec/index.js";
import { markComingBack } from "../coming-back.js";
import { dropLastValid } from "../last-valid.js";
import { statusFileFor } from "../status/index.js";
import type { Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import { setConditions, type Verdict } from "../verdicts.js";
import { removeRunFolders, runFoldersOf } from "./remove-run-folders.js";
import { tearDown } from "./stop.js";

/**
 * How long a definition must have been gone before what runs for it is torn down, ms: a checkout
 * that switches commits, a tool that replaces the file by removing it first, or a mistaken `mv`
 * undone at once must not cost a teardown and a relaunch (deregistered meanwhile: clients get 404).
 */
export const removalGraceMs = 2_000;

export function prune(forgetMemory: (name: string) => void, promiseBack: (name: string, model: string) => void): Step {
  return {
    name: "prune",
    action: "prune",
    failure: "TeardownFailed",
    async run(pass) {
      const ours = pass.action?.kind === "prune";
      if (ours) {
        const waited = await waitOutRemovalGrace(pass);
        if (waited !== undefined) return waited;
        await markServedElsewhere(pass, promiseBack);
        await tearDown(pass);
      }
      await removeRunFolders(pass, await runFoldersOf(pass), "a pruned cluster");
      return forget(pass, ours, forgetMemory);
    },
  };
}

/**
 * Within the removal grace: the cluster keeps running, and the status says when it is torn down;
 * the pass comes back once the grace has passed (or at once when the file comes back).
 */
async function waitOutRemovalGrace(pass: Pass): Promise<Verdict | undefined> {
  const { memory } = pass;
  const left = (memory.removedSince ?? -Infinity) + removalGraceMs - performance.now();
  if (left <= 0) return undefined;
  const message = `the definition is gone: what runs is torn down in ${Math.ceil(left / 1000)} s unless it comes back`;
  setConditions(memory, memory.lastGood?.revision ?? pass.entry?.revision ?? "", { Reconciling: { status: "True", reason: "DefinitionRemoved", message } });
  pass.world.log.info({ cluster: pass.name, inMs: left }, "definition gone: torn down once the removal grace has passed, unless it comes back");
  return { action: "none", result: "waiting", health: memory.status?.health ?? "Progressing", outcome: { kind: "requeue", afterMs: left } };
}

/**
 * A definition renamed (`git mv a.toml b.toml`), or its model moved to another definition of the
 * folder: that one launches the model once this teardown frees the nodes, seconds later. Between the
 * two the router would answer the model 404, which clients read as gone for good; it is marked as
 * coming back instead (503 + Retry-After, 60 s, ended by the other's registration). The promise is
 * the other cluster's from then on: its passes renew the mark while its launch is tried again (a
 * port it waits for), and withdraw it if it stalls. Best effort.
 */
async function markServedElsewhere(pass: Pass, promiseBack: (name: string, model: string) => void): Promise<void> {
  const model = pass.memory.lastGood?.spec.model.id;
  if (model === undefined || pass.entry?.routerBackend === undefined) return;
  const others = (await findClusterFiles(pass.world.dir).catch(() => [] as string[])).filter((file) => file !== pass.file);
  for (const file of others) {
    const other = await loadCluster(file, pass.settings);
    if (!other.ok || other.value.model.id !== model || !other.value.router.register || other.value.desired !== "running" || other.value.suspend) continue;
    // One that serves the model already keeps it routed: nothing to promise, and a mark it held would
    // be renewed by its every pass.
    const running = await pass.ledger.read(other.value.name).catch(() => undefined);
    if (running?.phase === "running" && running.routerBackend !== undefined) return;
    pass.world.log.info({ cluster: pass.name, model, by: other.value.name }, "the model is served next by another definition: marked as coming back meanwhile");
    promiseBack(other.value.name, model);
    return markComingBack(pass, model);
  }
}

async function forget(pass: Pass, tornDown: boolean, forgetMemory: (name: string) => void): Promise<Verdict> {
  await dropLastValid(pass.settings.daemon.stateDir, pass.name);
  await rm(statusFileFor(pass.file), { force: true });
  forgetMemory(pass.name);
  return { action: tornDown ? "prune" : "none", result: "success", health: "Stopped", outcome: { kind: "done" }, pruned: true };
}
