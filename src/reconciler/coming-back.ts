/**
 * The router's promise that a model comes back: while a registered cluster is torn down and
 * launched again, the embedded router answers its model 503 with Retry-After (clients retry)
 * rather than 404 (they give up), for as long as the mark the daemon keeps in the relaunch-marks
 * file lasts (60 s each time it is set).
 */
import { defaultRelaunchMarkMs } from "../router/index.js";
import type { Pass } from "./pass.js";

/** Mark `model` as coming back in the router (503 + Retry-After until it is registered again or the mark expires); best effort. */
export async function markComingBack(pass: Pass, model: string): Promise<void> {
  const { world, settings } = pass;
  await world
    .registrarFor(settings)
    .markRelaunching(model, Date.now() + defaultRelaunchMarkMs)
    .catch((error: unknown) => world.log.warn({ cluster: pass.name, err: error }, "could not mark the model as coming back"));
}

/** How often a relaunch under way renews its model's coming-back mark, ms: well within the mark's 60 s. */
const comingBackRenewMs = 20_000;

/**
 * Keep `model` marked as coming back while a relaunch runs: now, every 20 s, and once more when it
 * stops (a failed attempt: the mark then covers the back-off until the next one, at most 60 s).
 */
export function keepComingBack(pass: Pass, model: string): { stop(failed: boolean): void } {
  void markComingBack(pass, model);
  const timer = setInterval(() => void markComingBack(pass, model), comingBackRenewMs);
  return {
    stop(failed) {
      clearInterval(timer);
      if (failed) void markComingBack(pass, model);
    },
  };
}
