/**
 * Optional continuum registrar for deployments that prefer the router's admin API over its config
 * file. continuum-router documents that the API exists (bearer-token auth) but not its paths, so the
 * paths are settings; the defaults below are a guess to be checked against the deployed version.
 */
import { ShardctlError, type RouterReason } from "../errors/index.js";
import { parseRouterConfig } from "./read-router-config.js";
import type { BackendEntry, Registrar } from "./types.js";
import { validateBackendEntry } from "./validate-backend-entry.js";

/** Request paths relative to `adminUrl`; `{name}` is replaced by the URL-encoded backend name. */
export type AdminPaths = {
  /** GET, answers a JSON list of backends (bare, or under `backends` or `data`). Default `/admin/backends`. */
  list: string;
  /** POST with the entry as the JSON body; must replace a same-named entry. Default `/admin/backends`. */
  register: string;
  /** DELETE; 404 counts as already gone. Default `/admin/backends/{name}`. */
  deregister: string;
};

export const DEFAULT_ADMIN_PATHS: AdminPaths = {
  list: "/admin/backends",
  register: "/admin/backends",
  deregister: "/admin/backends/{name}",
};

export type AdminRegistrarOptions = {
  adminUrl: string;
  /** Name of the environment variable holding the bearer token; no Authorization header when unset. */
  adminTokenEnv?: string;
  adminPaths?: Partial<AdminPaths>;
  /** Per-request deadline in milliseconds. Default 5000. */
  timeoutMs?: number;
  /** How long a withdrawn registration is watched for, in milliseconds. Default 600000 (10 min). */
  watchWithdrawnMs?: number;
};

export function createContinuumAdminRegistrar(options: AdminRegistrarOptions): Registrar {
  const { adminUrl, adminTokenEnv, timeoutMs = 5000, watchWithdrawnMs = 600_000 } = options;
  const paths: AdminPaths = { ...DEFAULT_ADMIN_PATHS, ...options.adminPaths };
  // An API that answers after the deadline may still apply the request: a registration given up
  // on and then withdrawn (a launch's rollback, a teardown) can land after its withdrawal and stay
  // for good, routing a removed cluster's model to nothing. What this registrar sent and withdrew
  // is remembered (in this process only) so that `sweep` can take such late arrivals back.
  const registered = new Map<string, string>();
  const withdrawn = new WithdrawnRegistrations(watchWithdrawnMs);
  // One call at a time per backend name: a sweep's removal is not sent while a new registration is
  // (one the router applies after its deadline may still land late: the resync registers again).
  const oneAtATime = createNameLocks();

  const call = async (reason: RouterReason, method: string, path: string, body?: unknown): Promise<Response> => {
    const headers: Record<string, string> = { accept: "application/json" };
    if (adminTokenEnv !== undefined) {
      const token = process.env[adminTokenEnv];
      if (token === undefined || token === "") {
        throw new ShardctlError(reason, `router admin token: environment variable ${adminTokenEnv} is not set`, { terminal: true });
      }
      headers.authorization = `Bearer ${token}`;
    }
    if (body !== undefined) headers["content-type"] = "application/json";
    const url = new URL(adminUrl);
    url.pathname = joinPath(url.pathname, path);
    try {
      return await fetch(url, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (error) {
      // Messages reach status files: never the credentials an admin URL may carry.
      const shown = new URL(url.href);
      shown.username = "";
      shown.password = "";
      throw new ShardctlError(reason, `router admin API ${method} ${shown.href}: ${(error as Error).message}`, { cause: error });
    }
  };

  const expectOk = async (reason: RouterReason, response: Response, what: string, allow404 = false): Promise<void> => {
    if (response.ok || (allow404 && response.status === 404)) return;
    const text = (await response.text().catch(() => "")).slice(0, 300);
    throw new ShardctlError(reason, `router admin API ${what}: HTTP ${response.status} ${text}`);
  };

  const list = async (): Promise<BackendEntry[]> => {
    const response = await call("RouterAdminFailed", "GET", paths.list);
    await expectOk("RouterAdminFailed", response, "list backends");
    const json: unknown = await response.json();
    const items = Array.isArray(json) ? json : pickList(json);
    return parseRouterConfig(JSON.stringify({ backends: items }), `${adminUrl}${paths.list}`).backends;
  };

  const remove = async (name: string): Promise<void> => {
    const response = await call("RouterDeregistrationFailed", "DELETE", paths.deregister.replaceAll("{name}", encodeURIComponent(name)));
    await expectOk("RouterDeregistrationFailed", response, `deregister ${name}`, true);
  };

  return {
    register: async (backend) => {
      const entry = validateBackendEntry(backend);
      await oneAtATime(entry.name, async () => {
        // Remembered before it is sent: one that fails at its deadline may still be applied.
        registered.set(entry.name, sameUrl(entry.url));
        const response = await call("RouterRegistrationFailed", "POST", paths.register, entry);
        await expectOk("RouterRegistrationFailed", response, `register ${entry.name}`);
      });
    },
    deregister: async (name) => {
      await oneAtATime(name, async () => {
        const url = registered.get(name);
        registered.delete(name);
        if (url !== undefined) withdrawn.add(name, url);
        await remove(name);
      });
    },
    lookup: async (name) => (await list()).find((entry) => entry.name === name),
    list,
    sweep: async () => {
      if (withdrawn.isEmpty()) return [];
      const taken: BackendEntry[] = [];
      for (const entry of await list()) {
        await oneAtATime(entry.name, async () => {
          // Registered again since (a relaunch): the cluster's own resync judges that entry.
          if (registered.has(entry.name) || !withdrawn.has(entry.name, sameUrl(entry.url))) return;
          await remove(entry.name);
          taken.push(entry);
        });
      }
      return taken;
    },
    // continuum-router documents no notion of a model that is coming back: it answers 404 meanwhile.
    markRelaunching: async () => undefined,
    clearRelaunching: async () => undefined,
    markStalled: async () => undefined,
    clearStalled: async () => undefined,
    clearAllStalled: async () => undefined,
  };
}

/** `url` as a router may give it back (`http://h:1/` for `http://h:1`): compared so. */
function sameUrl(url: string): string {
  return URL.canParse(url) ? new URL(url).href : url;
}

/** Registrations withdrawn within the last `keepMs` ms (by the monotonic clock): name and URL. */
class WithdrawnRegistrations {
  private readonly entries: { name: string; url: string; atMs: number }[] = [];

  constructor(private readonly keepMs: number) {}

  add(name: string, url: string): void {
    this.forgetOld();
    this.entries.push({ name, url, atMs: performance.now() });
  }

  has(name: string, url: string): boolean {
    this.forgetOld();
    return this.entries.some((e) => e.name === name && e.url === url);
  }

  isEmpty(): boolean {
    this.forgetOld();
    return this.entries.length === 0;
  }

  private forgetOld(): void {
    const since = performance.now() - this.keepMs;
    while (this.entries.length > 0 && this.entries[0]!.atMs < since) this.entries.shift();
  }
}

/** Runs calls given the same name one after another, in the order they came; other names at once. */
function createNameLocks(): <T>(name: string, run: () => Promise<T>) => Promise<T> {
  const tails = new Map<string, Promise<unknown>>();
  return async (name, run) => {
    const before = tails.get(name) ?? Promise.resolve();
    const mine = before.then(run);
    const tail = mine.catch(() => undefined);
    tails.set(name, tail);
    try {
      return await mine;
    } finally {
      if (tails.get(name) === tail) tails.delete(name);
    }
  };
}

function pickList(json: unknown): unknown[] {
  if (typeof json === "object" && json !== null) {
    for (const key of ["backends", "data"]) {
      const value = (json as Record<string, unknown>)[key];
      if (Array.isArray(value)) return value;
    }
  }
  return [];
}

// Keeps a path prefix of adminUrl (e.g. https://router/api) in front of the configured path.
function joinPath(base: string, path: string): string {
  return `${base.replace(/\/+$/, "")}/${path.replace(/^\/+/, "")}`;
}
