/**
 * Drafts a killed process left: writeFileAtomic writes `.<name>.<pid>.<8 hex>.tmp` beside the file
 * it replaces and renames it over; a process killed in between (kill -9, a reboot) leaves the
 * draft for good, in a definitions checkout that CI may commit. Drafts of a pid that no longer runs
 * are removed; nothing else is touched.
 */
import { readdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { lookAtProcess } from "../local-processes/index.js";

const draftName = /^\..+\.(\d+)\.[0-9a-f]{8}\.tmp$/;

/** Remove the drafts in `dir` whose writer no longer runs; returns their names. A folder that cannot be listed has none. */
export async function sweepDrafts(dir: string): Promise<string[]> {
  const removed: string[] = [];
  for (const name of await readdir(dir).catch(() => [] as string[])) {
    const pid = Number(draftName.exec(name)?.[1]);
    if (!Number.isInteger(pid) || pid <= 0 || (await lookAtProcess(pid)).runs) continue;
    await rm(join(dir, name), { force: true }).then(
      () => removed.push(name),
      () => undefined,
    );
  }
  return removed;
}
