/**
 * The definition is gone: tear down what this daemon launched for it and remove its run folders on
 * the nodes (launch files, token, engine logs: nothing would ever remove them), then the last valid
 * definition the state directory kept and the status file (last, so CI reading it sees the
 * teardown finish). With nothing of ours running there is only what the daemon kept to remove.
 */
import { rm } from "node:fs/promises";
import { runDirOf } from "../../cluster/index.js";
import { claimOf, stopLeftoverListeners } from "../../launch/index.js";
import { within, type NodeAccess } from "../../nodes/index.js";
import { dropLastValid } from "../last-valid.js";
import { statusFileFor } from "../status/index.js";
import type { Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import type { Verdict } from "../verdicts.js";
import { tearDown } from "./stop.js";

export function prune(forgetMemory: (name: string) => void): Step {
  return {
    name: "prune",
    action: "prune",
    failure: "TeardownFailed",
    async run(pass) {
      const ours = pass.action?.kind === "prune";
      if (ours) await tearDown(pass);
      await removeRunFolders(pass);
      return forget(pass, ours, forgetMemory);
    },
  };
}

/**
 * The cluster's run folder on each of its nodes, removed: those of the torn-down launch, or, with
 * nothing of ours running (a stalled or failed cluster, a launch called off), those of the nodes its
 * last valid definition used, where what a launch left out of the teardown's reach (a detached
 * engine still listening) is stopped first. One that cannot be removed (a silent node) is logged
 * and left.
 */
async function removeRunFolders(pass: Pass): Promise<void> {
  const { world, settings } = pass;
  const graceMs = world.teardownContext(settings, pass.ledger, pass.memory).graceMs;
  const places = await runFoldersOf(pass);
  await Promise.all(
    places.map(async ({ nodeName, node, dir, sweep }) => {
      const say = (_step: string, detail: string): void => world.log.warn({ cluster: pass.name, node: nodeName }, detail);
      const work = async (): Promise<boolean> => {
        // A cluster that never launched on this node has no folder there, and nothing to sweep:
        // one look (a removal of hundreds of stopped or invalid definitions stays a moment's work).
        if ((await node.stat(dir)) === undefined) return true;
        // Another daemon's cluster of this name has launched from the folder since: it is that
        // one's. Nor is a folder whose claim cannot be read now removed on a guess.
        const claim = await claimOf(node, dir, world.claimant(settings));
        if (claim !== "mine") {
          world.log.info(
            { cluster: pass.name, node: nodeName, dir, claimedBy: claim },
            claim === "unknown"
              ? "the run folder of a pruned cluster is left: whose it is could not be read in time"
              : "the run folder of a pruned cluster is left: another daemon launched from it since",
          );
          return true;
        }
        if (sweep) await stopLeftoverListeners(node, nodeName, [dir], graceMs, say);
        await node.remove(dir);
        return true;
      };
      const removed = await within(10_000 + graceMs, work(), false);
      if (!removed)
        world.log.warn(
          { cluster: pass.name, node: nodeName, dir },
          "the run folder of a pruned cluster was not removed in time (the node did not answer, or refused): what is left of it stays",
        );
    }),
  );
}

/** Where the cluster's run folders are: the torn-down launch's, or those of its last valid definition's nodes (to be swept first). */
async function runFoldersOf(pass: Pass): Promise<Array<{ nodeName: string; node: NodeAccess; dir: string; sweep: boolean }>> {
  const { world, settings, entry } = pass;
  // A launch of this name another daemon owns: its folders are its own.
  if (entry !== undefined && pass.observed?.ours !== true) return [];
  if (entry !== undefined) {
    const folders = new Map(entry.processes.map((p) => [`${p.node}\0${p.runDir}`, { nodeName: p.node, dir: p.runDir }]));
    return [...folders.values()].map((f) => ({ ...f, node: world.nodeFor(f.nodeName, settings), sweep: false }));
  }
  const spec = pass.memory.lastGood?.spec;
  if (spec === undefined) return [];
  try {
    const nodes = world.nodesOf(spec, settings);
    const named = new Map<string, NodeAccess>([...spec.nodes.map((name, i) => [name, nodes.stages[i]!] as const), [spec.coordinator.node, nodes.coordinator]]);
    const places = await Promise.all(
      [...named].map(async ([nodeName, node]) => ({ nodeName, node, dir: await within(10_000, runDirOf(node, pass.name, settings), ""), sweep: true })),
    );
    // A node whose home could not be read in time: its folder is not known, so nothing is removed there.
    return places.filter((place) => place.dir !== "");
  } catch {
    // A node its definition named is no longer in the registry: nothing to find there.
    return [];
  }
}

async function forget(pass: Pass, tornDown: boolean, forgetMemory: (name: string) => void): Promise<Verdict> {
  await dropLastValid(pass.settings.daemon.stateDir, pass.name);
  await rm(statusFileFor(pass.file), { force: true });
  forgetMemory(pass.name);
  return { action: tornDown ? "prune" : "none", result: "success", health: "Stopped", outcome: { kind: "done" }, pruned: true };
}
