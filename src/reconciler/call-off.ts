/**
 * A launch is called off — between its steps, in the middle of its staging, or while its engines
 * start — for one of two causes:
 *
 * - Superseded: while a pass launches a revision, its definition is looked at again every second,
 *   with the settings as they are now (a node's registry entry is part of the revision); once they
 *   ask for another revision, or the file is gone, the pass has been overtaken. A revert during a
 *   long staging then serves the reverted-to revision within seconds instead of after launching the
 *   abandoned one. An invalid edit does not overtake a pass: an invalid definition keeps the last
 *   good revision, which is the one being launched; nor do settings that no longer parse (the pass
 *   reads the definition with its own then).
 * - DaemonStopping: the daemon is stopping; it does not wait for a staging that may take hours.
 *
 * Either way the pass's signal aborts: staging cuts its transfers (their partial files kept for a
 * later staging to resume); the steps that would replace what runs, stage, or count the launch
 * against the budget (and so launch) are not started; and a launch under way stops where it is
 * (its engines starting, loading, or hung), tears down what it started and gives its count back.
 */
import type { Settings } from "../spec/index.js";
import type { ParseCache } from "./parse-cache.js";
import type { Pass } from "./pass.js";
import { readDesired } from "./steps/read-definition.js";

/** How often the definition is looked at while a launch's steps run, ms. */
export const revisionLookMs = 1_000;

/** Why a launch was called off: the signal's reason. */
export class LaunchCalledOff extends Error {
  constructor(
    readonly reason: "Superseded" | "DaemonStopping",
    message: string,
  ) {
    super(message);
    this.name = "LaunchCalledOff";
  }
}

export interface CallOff {
  /** Aborted, with a LaunchCalledOff, once the launch is called off. */
  signal: AbortSignal;
  /** Look at the definition now (before a step that yields: a revert may have come since the last look). */
  lookNow(): Promise<void>;
  stop(): void;
}

/** Watch `pass`'s definition with the settings `settingsNow` reads, and `stopping` (the daemon's), while the pass launches. */
export function watchForCallOff(pass: Pass, parsed: ParseCache, settingsNow: () => Promise<Settings>, stopping: AbortSignal, everyMs = revisionLookMs): CallOff {
  const controller = new AbortController();
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  const onStopping = (): void => controller.abort(new LaunchCalledOff("DaemonStopping", "the daemon is stopping"));
  const check = async (): Promise<void> => {
    const moved = await movedOn(pass, parsed, settingsNow).catch(() => undefined);
    if (!stopped && !controller.signal.aborted && moved !== undefined) controller.abort(new LaunchCalledOff("Superseded", moved));
  };
  const look = async (): Promise<void> => {
    await check();
    if (!stopped && !controller.signal.aborted) timer = setTimeout(() => void look(), everyMs);
  };
  timer = setTimeout(() => void look(), everyMs);
  stopping.addEventListener("abort", onStopping, { once: true });
  if (stopping.aborted) onStopping();
  return {
    signal: controller.signal,
    lookNow: check,
    stop() {
      stopped = true;
      clearTimeout(timer);
      stopping.removeEventListener("abort", onStopping);
    },
  };
}

/** What the definition asks for now, when it is no longer the pass's revision; undefined otherwise. */
async function movedOn(pass: Pass, parsed: ParseCache, settingsNow: () => Promise<Settings>): Promise<string | undefined> {
  const settings = await settingsNow().catch(() => pass.settings);
  const { desired } = await readDesired(pass.file, settings, parsed);
  if (desired.kind === "absent") return `its definition ${pass.file} was removed`;
  if (desired.kind === "invalid" || desired.revision === pass.revision) return undefined;
  const asked = `asks for revision ${desired.revision.slice(0, 12)}`;
  // The same text read with the pass's settings: then only the settings changed.
  const before = settings === pass.settings ? desired : (await readDesired(pass.file, pass.settings, parsed)).desired;
  return before.kind === "defined" && before.revision === pass.revision ? `the settings changed: its definition now ${asked}` : `its definition now ${asked}`;
}
