/** Shapes shared by the registrars and the embedded router. */
import type { StalledMark } from "./relaunch-marks.js";

/** One entry of a continuum-router `backends:` list. `weight` defaults to 1 where it matters. */
export type BackendEntry = {
  name: string;
  url: string;
  models: string[];
  weight?: number;
  /**
   * The model name the backend is sent in place of the one the client asked for (the embedded
   * router rewrites the request's `model`): for engines that serve one model under a fixed name,
   * such as mlx-lm, which answers only its `--model` path or "default_model".
   */
  upstream_model?: string;
};

/**
 * Adds and removes backends in a router. `register` is idempotent (an entry with the same name is
 * replaced); `deregister` of a name that is not there succeeds.
 */
export interface Registrar {
  /** Also clears the relaunch marks of the entry's models: a backend serves them again. */
  register(backend: BackendEntry): Promise<void>;
  deregister(name: string): Promise<void>;
  lookup(name: string): Promise<BackendEntry | undefined>;
  list(): Promise<BackendEntry[]>;
  /**
   * Says that `model` is coming back: its cluster died and is being relaunched. Until `untilMs` (ms
   * since the epoch) or a `register` of a backend listing it, the embedded router answers 503 with
   * Retry-After for it instead of 404. Call it before the deregistration, so there is no window in
   * which the model is unknown. A no-op for routers that have no such notion (the admin API, none).
   */
  markRelaunching(model: string, untilMs: number): Promise<void>;
  /** Withdraws `model`'s relaunch mark (the cluster stalled or was stopped: it is not coming back). */
  clearRelaunching(model: string): Promise<void>;
  /**
   * Says that `model`'s cluster stalled: until a `register` listing it, a `markRelaunching` of it or
   * a `clearStalled`, the embedded router answers 503 `model_stalled` naming the cluster and the
   * reason, instead of 404. Replaces a relaunch mark. A no-op where there is no such notion.
   */
  markStalled(model: string, mark: StalledMark): Promise<void>;
  /** Withdraws `model`'s stalled mark when `cluster` set it (another cluster may serve the same model). */
  clearStalled(model: string, cluster: string): Promise<void>;
  /** Withdraws every stalled mark: the daemon starts, and its first passes mark again what is still stalled. */
  clearAllStalled(): Promise<void>;
  /**
   * A folder a registration must write in that takes no new file now, and the system's words, else
   * undefined: asked as the daemon starts and before a launch starts anything, so that a launch is
   * not run whole to fail at its registration. Absent: nothing to ask.
   */
  unwritable?(): Promise<{ folder: string; problem: string } | undefined>;
  /**
   * Takes back registrations the router applied after they were withdrawn (an admin API that
   * answered after its deadline, then applied the request): entries whose name and URL this
   * registrar withdrew lately and has not registered since. Returns the entries taken back. Absent
   * where edits cannot land late (the config file is written before the call returns).
   */
  sweep?(): Promise<BackendEntry[]>;
}

/** What the embedded router needs from a continuum-router YAML config. */
export type RouterConfig = {
  /** `server.bind_address` split; undefined when the file has no `server.bind_address`. */
  bind?: { host: string; port: number };
  backends: BackendEntry[];
};
