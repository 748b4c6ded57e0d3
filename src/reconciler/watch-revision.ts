/**
 * While a pass launches a revision, its definition is looked at again every second: once the file
 * asks for another revision, or is gone, the pass has been overtaken. Its signal then aborts, so
 * staging cuts its transfers (their partial files kept), and the steps that would replace, budget
 * or launch are not started: a revert during a long staging serves the reverted-to revision within
 * seconds instead of after launching the abandoned one. An invalid edit does not overtake a pass:
 * an invalid definition keeps the last good revision, which is the one being launched.
 */
import { entryExists } from "../files/index.js";
import { desiredStateOf } from "./decision-inputs.js";
import type { ParseCache } from "./parse-cache.js";
import type { Pass } from "./pass.js";

/** How often the definition is looked at while a launch's steps run, ms. */
export const revisionLookMs = 1_000;

export interface RevisionWatch {
  /** Aborted, with an Error saying what the definition now asks for, once the pass is overtaken. */
  signal: AbortSignal;
  stop(): void;
}

export function watchRevision(pass: Pass, parsed: ParseCache, everyMs = revisionLookMs): RevisionWatch {
  const controller = new AbortController();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const look = async (): Promise<void> => {
    const moved = await movedOn(pass, parsed).catch(() => undefined);
    if (stopped) return;
    if (moved !== undefined) {
      controller.abort(new Error(moved));
      return;
    }
    timer = setTimeout(() => void look(), everyMs);
  };
  timer = setTimeout(() => void look(), everyMs);
  return {
    signal: controller.signal,
    stop() {
      stopped = true;
      clearTimeout(timer);
    },
  };
}

/** What the definition asks for now, when it is no longer the pass's revision; undefined otherwise. */
async function movedOn(pass: Pass, parsed: ParseCache): Promise<string | undefined> {
  if (!(await entryExists(pass.file))) return `its definition ${pass.file} was removed`;
  const loaded = await parsed.loadCluster(pass.file, pass.settings);
  if (!loaded.ok) return undefined;
  const revision = desiredStateOf(loaded.value, pass.settings).revision;
  if (revision === pass.revision) return undefined;
  return `its definition now asks for revision ${revision.slice(0, 12)}`;
}
