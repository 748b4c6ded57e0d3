/** Shapes shared by the registrars and the embedded router. */

/** One entry of a continuum-router `backends:` list. `weight` defaults to 1 where it matters. */
export type BackendEntry = {
  name: string;
  url: string;
  models: string[];
  weight?: number;
};

/**
 * Adds and removes backends in a router. `register` is idempotent (an entry with the same name is
 * replaced); `deregister` of a name that is not there succeeds.
 */
export interface Registrar {
  register(backend: BackendEntry): Promise<void>;
  deregister(name: string): Promise<void>;
  lookup(name: string): Promise<BackendEntry | undefined>;
  list(): Promise<BackendEntry[]>;
}

/** What the embedded router needs from a continuum-router YAML config. */
export type RouterConfig = {
  /** `server.bind_address` split; undefined when the file has no `server.bind_address`. */
  bind?: { host: string; port: number };
  backends: BackendEntry[];
};
