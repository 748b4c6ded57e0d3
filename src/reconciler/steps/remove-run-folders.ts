/**
 * A cluster's run folders (launch files, token, engine logs) removed from nodes it no longer uses:
 * every node of a pruned cluster, and the nodes a replaced launch used that the new revision does
 * not (nothing else would ever remove them, and a claim left there holds off another daemon's
 * cluster of the name for ten minutes).
 */
import { runDirOf } from "../../cluster/index.js";
import { claimOf, isRunFolderOf, stopLeftoverListeners, type LedgerProcess } from "../../launch/index.js";
import { within, type NodeAccess } from "../../nodes/index.js";
import type { Pass } from "../pass.js";

/** A run folder of the cluster: its node, and whether a launch's leftover listeners are swept there first. */
export interface RunFolderPlace {
  nodeName: string;
  node: NodeAccess;
  dir: string;
  sweep: boolean;
}

/**
 * The cluster's run folders at `places` removed, each only while it is this daemon's (its claim),
 * what a launch left out of the teardown's reach (a detached engine still listening) stopped first
 * where `sweep` says so. One that cannot be removed (a silent node) is logged and left. `whose`
 * names the cluster in the log: "a pruned cluster", "a cluster moved off the node".
 */
export async function removeRunFolders(pass: Pass, places: readonly RunFolderPlace[], whose: string): Promise<void> {
  const { world, settings } = pass;
  const graceMs = world.teardownContext(settings, pass.ledger, pass.memory).graceMs;
  await Promise.all(
    places.map(async ({ nodeName, node, dir, sweep }) => {
      const say = (_step: string, detail: string): void => world.log.warn({ cluster: pass.name, node: nodeName }, detail);
      const work = async (): Promise<boolean> => {
        // Only a run folder of this cluster by its form is removed, whatever a ledger entry says.
        if (!isRunFolderOf(dir, pass.name, settings.daemon.stateDir)) {
          world.log.warn(
            { cluster: pass.name, node: nodeName, dir },
            `the run folder of ${whose} is left: ${dir} is not a run folder of the cluster (<model_dir>/.shardctl/run/${pass.name}, or run/${pass.name} in the state directory)`,
          );
          return true;
        }
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
              ? `the run folder of ${whose} is left: whose it is could not be read in time`
              : `the run folder of ${whose} is left: another daemon launched from it since`,
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
          `the run folder of ${whose} was not removed in time (the node did not answer, or refused): what is left of it stays`,
        );
    }),
  );
}

/**
 * Where a pruned cluster's run folders are: the torn-down launch's, or, with nothing of ours
 * running (a stalled or failed cluster, a launch called off), those of the nodes its last valid
 * definition used (to be swept first).
 */
export async function runFoldersOf(pass: Pass): Promise<RunFolderPlace[]> {
  const { world, settings, entry } = pass;
  // A launch of this name another daemon owns: its folders are its own.
  if (entry !== undefined && pass.observed?.ours !== true) return [];
  if (entry !== undefined) return foldersOfProcesses(entry.processes).map((f) => ({ ...f, node: world.nodeFor(f.nodeName, settings), sweep: false }));
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

/** The run folders `processes` ran from, each once (one folder on a node may hold several processes). */
export function foldersOfProcesses(processes: readonly LedgerProcess[]): Array<{ nodeName: string; dir: string }> {
  return [...new Map(processes.map((p) => [`${p.node}\0${p.runDir}`, { nodeName: p.node, dir: p.runDir }])).values()];
}
