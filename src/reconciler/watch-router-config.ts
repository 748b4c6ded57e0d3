/**
 * The router's YAML changes under the daemon (config management rewrites it, a person edits it,
 * continuum-router's operator restores an old copy): a cluster whose backend is no longer listed is
 * not routed to, and its status must not keep saying Registered until the next resync (up to
 * `resync_seconds`). The daemon watches the file it registers clusters in, and each cluster of its
 * own whose backend the file no longer lists, or lists with another URL or without its model, gets
 * a pass at once: the pass sees the loss, says so, and registers it again.
 */
import { Ledger } from "../launch/index.js";
import { readRouterConfig, watchConfig } from "../router/index.js";
import type { Logger } from "pino";

export interface RouterConfigWatch {
  /** The YAML file the registrar edits. */
  configFile: string;
  stateDir: string;
  /** Whether a ledger entry is this daemon's (another daemon's clusters are left to it). */
  owns: (entry: { owner?: string }) => boolean;
  /** A cluster whose backend the file no longer lists as registered. */
  onLost: (cluster: string) => void;
  log: Logger;
}

/** Start watching; returns the stop function. */
export function watchRouterConfig(o: RouterConfigWatch): () => void {
  const ledger = new Ledger(o.stateDir);
  const check = async (): Promise<void> => {
    // A file that does not parse now (half an edit) is looked at again at its next change.
    const listed = new Map((await readRouterConfig(o.configFile)).backends.map((b) => [b.name, b]));
    for (const entry of await ledger.list()) {
      if (entry.routerBackend === undefined || entry.phase !== "running" || !o.owns(entry)) continue;
      const backend = listed.get(entry.routerBackend);
      // Gone, or pointing elsewhere (an old copy restored): not routed to what runs.
      const lost =
        backend === undefined ||
        (entry.coordinatorUrl !== undefined && backend.url !== entry.coordinatorUrl) ||
        (entry.model !== undefined && !backend.models.includes(entry.model));
      if (lost) o.onLost(entry.cluster);
    }
  };
  return watchConfig(
    o.configFile,
    () => void check().catch((error: unknown) => o.log.debug({ err: error, file: o.configFile }, "router config not read after a change")),
    (error) => o.log.warn({ err: error, file: o.configFile }, "cannot watch the router config; a backend removed from it is registered again at the next resync"),
    200,
  );
}
