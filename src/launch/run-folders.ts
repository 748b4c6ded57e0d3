/**
 * The launch's run folders on its nodes: what an earlier launch left listening there is stopped
 * before ports are chosen, and a folder whose file system is full is said once the cluster serves.
 */
import type { LaunchRequest } from "./types.js";
import { freeKiB, within } from "../nodes/index.js";
import { stopLeftoverListeners } from "./leftover-listeners.js";
import type { RunFolder } from "./run-claim.js";

/**
 * What an earlier launch of this cluster left listening on its nodes (see leftover-listeners.ts) is
 * stopped before this launch chooses ports: it would hold them and answer in place of this one.
 */
export async function stopLeftovers(request: LaunchRequest, say: (step: string, detail: string) => void): Promise<void> {
  const byNode = new Map<string, RunFolder[]>();
  for (const folder of runFoldersOf(request)) byNode.set(folder.nodeName, [...(byNode.get(folder.nodeName) ?? []), folder]);
  await Promise.all(
    [...byNode].map(([nodeName, folders]) =>
      stopLeftoverListeners(
        folders[0]!.node,
        nodeName,
        folders.map((f) => f.runDir),
        request.deadlines.stopGraceMs,
        say,
      ),
    ),
  );
}

/**
 * Room below which a run folder's file system counts as full, KiB (1 MiB): an engine's log, and the
 * exit status its wrapper writes when it ends, no longer fit.
 */
const fullRunFolderKiB = 1024;

/**
 * The run folders of the launch whose file system is full, said once it serves: the launch files
 * fitted, but an engine's log and its exit status may not, so a death there would be reported
 * without how it ended or what it said. Said, not refused: it serves. One question to each node,
 * bounded (2 s); a node that does not say is passed over.
 */
export async function runFoldersFull(request: LaunchRequest): Promise<string[]> {
  const said = await Promise.all(
    runFoldersOf(request).map(async (folder) => {
      const free = await within(
        2_000,
        freeKiB(folder.node, folder.runDir).catch(() => undefined),
        undefined,
      );
      return free === undefined || free >= fullRunFolderKiB
        ? []
        : [
            `the file system holding ${folder.runDir} on ${folder.nodeName} has ${free} KiB free: the engines' logs there no longer grow, and a death there would be reported without its exit status or its last words; free space there`,
          ];
    }),
  );
  return said.flat();
}

/** The launch's run folders, each once. */
export function runFoldersOf(request: LaunchRequest): RunFolder[] {
  const folders = new Map<string, RunFolder>();
  for (const target of [...request.stages, request.coordinator])
    folders.set(`${target.nodeName}\0${target.runDir}`, { node: target.node, nodeName: target.nodeName, runDir: target.runDir });
  return [...folders.values()];
}
