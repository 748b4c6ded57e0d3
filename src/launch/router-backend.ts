/**
 * The router entry of a cluster's HTTP server: what a launch registers, and what a resync
 * registers again when the router lost it or a router-only edit renamed it. `upstream_model` is
 * the name the engine serves under when it is not the one clients send (mlx-lm's).
 */
import type { EngineFacts } from "../engines/index.js";
import type { BackendEntry } from "../router/index.js";

export function routerBackendOf(
  router: { backend: string; weight?: number | undefined },
  url: string,
  modelName: string,
  facts: Pick<EngineFacts, "servedModelName">,
): BackendEntry {
  return {
    name: router.backend,
    url,
    models: [modelName],
    ...(router.weight === undefined ? {} : { weight: router.weight }),
    ...(facts.servedModelName === undefined ? {} : { upstream_model: facts.servedModelName }),
  };
}
