/**
 * The router's promise that a model comes back: while a registered cluster is torn down and
 * launched again, the embedded router answers its model 503 with Retry-After (clients retry)
 * rather than 404 (they give up), for as long as the mark the daemon keeps in the relaunch-marks
 * file lasts (60 s each time it is set, renewed while the daemon brings the cluster back).
 */
import { defaultRelaunchMarkMs } from "../router/index.js";
import type { Pass } from "./pass.js";
import type { Verdict } from "./verdicts.js";

/** Mark `model` as coming back in the router (503 + Retry-After until it is registered again or the mark expires); best effort. */
export async function markComingBack(pass: Pass, model: string): Promise<void> {
  const { world, settings } = pass;
  await world
    .registrarFor(settings)
    .markRelaunching(model, Date.now() + defaultRelaunchMarkMs)
    .catch((error: unknown) => world.log.warn({ cluster: pass.name, err: error }, "could not mark the model as coming back"));
}

/** How often a pass that brings the cluster back renews its model's coming-back mark, ms: well within the mark's 60 s. */
const comingBackRenewMs = 20_000;

/** Healths after which the cluster does not come back by itself: the mark is withdrawn (the router answers 404). */
const notComingBack: ReadonlySet<string> = new Set(["Stalled", "Stopped", "Suspended", "Disabled"]);

/**
 * Keep the model the cluster promises back (`memory.comingBack`, set by a death or a replace)
 * marked while the pass runs: every 20 s, whichever step it is at (a staging may take long), and
 * once more as it ends while the cluster will come back (the mark then covers the back-off before
 * the next pass, at most a minute). A pass that ends with the cluster stalled, stopped, suspended,
 * disabled or removed withdraws the mark: it will not come back by itself. A launch that serves
 * clears `comingBack` (its registration ends the mark).
 */
export function keepComingBack(pass: Pass): { end(verdict: Verdict): Promise<void> } {
  const renew = (): void => {
    const model = pass.memory.comingBack;
    if (model !== undefined) void markComingBack(pass, model);
  };
  // Renewed as the pass begins, too: the mark a death set may be most of its 60 s old by then (a
  // teardown that waited on a node that does not answer).
  renew();
  const timer = setInterval(renew, comingBackRenewMs);
  return {
    async end(verdict) {
      clearInterval(timer);
      await markStalledOrNot(pass, verdict).catch((error: unknown) =>
        pass.world.log.warn({ cluster: pass.name, err: error }, "could not update the model's stalled mark in the router"),
      );
      const model = pass.memory.comingBack;
      if (model === undefined) return;
      if (verdict.pruned !== true && !notComingBack.has(verdict.health)) return renew();
      pass.memory.comingBack = undefined;
      await pass.world
        .registrarFor(pass.settings)
        .clearRelaunching(model)
        .catch((error: unknown) => pass.world.log.warn({ cluster: pass.name, err: error }, "could not withdraw the model's coming-back mark"));
    },
  };
}

/**
 * A pass that ends with the cluster Stalled marks its model stalled in the router (503
 * `model_stalled` naming the cluster and the reason, not a 404 a client reads as a typo); one that
 * ends otherwise withdraws the mark this cluster set. Only for a cluster registered with the
 * router; best effort, as the coming-back mark.
 */
async function markStalledOrNot(pass: Pass, verdict: Verdict): Promise<void> {
  const { memory, world, settings, name } = pass;
  const spec = memory.lastGood?.spec;
  const model = verdict.health === "Stalled" && verdict.pruned !== true && spec?.router.register === true ? spec.model.id : undefined;
  const previous = memory.stalledMark;
  const registrar = world.registrarFor(settings);
  const warn = (error: unknown): void => world.log.warn({ cluster: name, err: error }, "could not update the model's stalled mark in the router");
  if (previous !== undefined && previous.model !== model) {
    memory.stalledMark = undefined;
    await registrar.clearStalled(previous.model, name).catch(warn);
  }
  if (model === undefined) return;
  memory.stalledMark = { model, since: previous?.model === model ? previous.since : Date.now() };
  const reason = verdict.reason ?? memory.lastError?.reason ?? "Stalled";
  await registrar.markStalled(model, { cluster: name, reason, since: memory.stalledMark.since }).catch(warn);
}
