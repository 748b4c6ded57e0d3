/**
 * Where the daemon asks whether the router answers: `[router] health_url` when set; else the
 * embedded router's `/health`; else `/health` at the origin of the admin API (continuum-router
 * serves it unauthenticated, beside its admin paths; any HTTP answer counts, so a server without
 * it still says it answers); else, for a router driven through its YAML file, `/health` at the
 * file's `server.bind_address` (a wildcard address asked on loopback). A file that names no fixed
 * address (none, or port 0) leaves the router unwatched unless `health_url` says where: its
 * registrations are still checked at every pass.
 */
import { joinHostPort } from "../nodes/index.js";
import { readRouterConfig } from "../router/index.js";
import type { Settings } from "../spec/index.js";

/** The URL to ask, or undefined when there is none. Throws when the router's YAML cannot be read (half an edit). */
export async function routerHealthUrl(settings: Settings, embeddedUrl: string | undefined): Promise<string | undefined> {
  const router = settings.router;
  if (router.kind === "none") return undefined;
  if (router.healthUrl !== undefined) return router.healthUrl;
  if (router.embedded && embeddedUrl !== undefined) return `${embeddedUrl}/health`;
  if (router.adminUrl !== undefined) return new URL("/health", router.adminUrl).href;
  if (router.config === undefined) return undefined;
  const bind = (await readRouterConfig(router.config)).bind;
  if (bind === undefined || bind.port === 0) return undefined;
  return `http://${joinHostPort(askableHost(bind.host), bind.port)}/health`;
}

/** A listening address as a client reaches it: the wildcard ones on loopback. */
function askableHost(host: string): string {
  if (host === "0.0.0.0" || host === "") return "127.0.0.1";
  if (host === "::") return "::1";
  return host;
}
