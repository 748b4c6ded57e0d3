/**
 * Reads the parts of a continuum-router YAML config that shardctl uses: `server.bind_address` and the
 * `backends:` list. Every other key is allowed and ignored, since the file belongs to the router.
 */
import { parse as parseYaml } from "yaml";
import { z } from "zod";
import { ShardctlError } from "../errors/index.js";
import { FileRefusedError, readRegularText } from "../files/index.js";
import type { BackendEntry, RouterConfig } from "./types.js";

const backendSchema = z.looseObject({
  name: z.string().min(1),
  url: z.url({ protocol: /^https?$/ }),
  // A backend without `models` serves nothing through the embedded router (continuum-router would
  // discover them; we do not), so it defaults to an empty list.
  models: z.array(z.string().min(1)).default([]),
  weight: z.number().positive().optional(),
  upstream_model: z.string().min(1).optional(),
});

const configSchema = z.looseObject({
  server: z.looseObject({ bind_address: z.string().optional() }).nullish(),
  backends: z.array(backendSchema).nullish(),
});

/**
 * Largest router config read, bytes (4 MiB). A backend entry is about 150 bytes; thousands of
 * backends and the router's other settings fit many times over. The yaml parser itself refuses
 * alias bombs and turns deep nesting into a parse error, so the size is the one bound it needs.
 */
export const maxRouterConfigBytes = 4 * 1024 * 1024;

/**
 * Reads and validates `file`; throws ShardctlError `RouterConfigInvalid` naming the file, or
 * `NotRegularFile` / `FileTooLarge` at once for a FIFO, a directory, a device or a file over the
 * cap (a reload that blocked on a FIFO would never finish).
 */
export async function readRouterConfig(file: string): Promise<RouterConfig> {
  let text: string;
  try {
    text = await readRegularText(file, { maxBytes: maxRouterConfigBytes, what: "router config" });
  } catch (error) {
    if (error instanceof FileRefusedError) throw error;
    if ((error as NodeJS.ErrnoException).code === "ENOENT") {
      throw new ShardctlError(
        "RouterConfigUnreadable",
        `router config ${file} does not exist (named by [router] config in shardctl.toml, or --config): create it with at least\n` +
          `  server:\n    bind_address: "127.0.0.1:8088"\n  backends: []\n` +
          `or point [router] config at continuum-router's config file`,
        { cause: error },
      );
    }
    throw new ShardctlError("RouterConfigUnreadable", `cannot read router config ${file}: ${(error as Error).message}`, { cause: error });
  }
  return parseRouterConfig(text, file);
}

/** Parses YAML text; `source` names it in error messages. An empty document is an empty config. */
export function parseRouterConfig(text: string, source: string): RouterConfig {
  let raw: unknown;
  try {
    raw = parseYaml(text, { prettyErrors: true });
  } catch (error) {
    throw invalid(source, (error as Error).message, error);
  }
  const parsed = configSchema.safeParse(raw ?? {});
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const where = issue === undefined ? "" : issue.path.join(".");
    throw invalid(source, `${where}: ${issue?.message ?? "invalid"}`);
  }
  const backends = parsed.data.backends ?? [];
  const seen = new Set<string>();
  for (const backend of backends) {
    if (seen.has(backend.name)) throw invalid(source, `backends: duplicate backend name "${backend.name}"`);
    seen.add(backend.name);
  }
  const bindAddress = parsed.data.server?.bind_address;
  return {
    bind: bindAddress === undefined ? undefined : parseBindAddress(bindAddress, source),
    backends: backends.map(toBackendEntry),
  };
}

/** Splits `host:port` (IPv6 as `[::1]:8080`); port 0 means "any free port". */
export function parseBindAddress(value: string, source: string): { host: string; port: number } {
  const match = /^(?:\[([^\]]+)\]|([^:]+)):(\d{1,5})$/.exec(value.trim());
  const port = match === null ? NaN : Number(match[3]);
  if (match === null || port > 65535) {
    throw invalid(source, `server.bind_address: expected "host:port", got "${value}"`);
  }
  return { host: match[1] ?? match[2] ?? "", port };
}

function toBackendEntry(backend: z.infer<typeof backendSchema>): BackendEntry {
  const entry: BackendEntry = { name: backend.name, url: backend.url, models: backend.models };
  if (backend.weight !== undefined) entry.weight = backend.weight;
  if (backend.upstream_model !== undefined) entry.upstream_model = backend.upstream_model;
  return entry;
}

function invalid(source: string, message: string, cause?: unknown): ShardctlError {
  return new ShardctlError("RouterConfigInvalid", `${source}: ${message}`, { terminal: true, cause });
}
