/** `shardctl.toml` → `Settings`: TOML, then the schema, then the checks that span fields. */
import { dirname, resolve } from "node:path";
import { isNearLocal, ShardctlError } from "../errors/index.js";
import { FileRefusedError } from "../files/index.js";
import { describeZodIssue, fromZodIssues, makeIssue, sortIssues } from "./issues.js";
import { type Locator, locateKeys } from "./locate.js";
import { isPortablePath, resolveLocalPath } from "./local-path.js";
import { parsePortRange } from "./port-range.js";
import { deepFreeze, getRaw, getString, isTable } from "./raw.js";
import { maxSettingsBytes, readSettingsText } from "./read-spec-file.js";
import { readToml } from "./read-toml.js";
import { listAllowedKeys } from "./schema-keys.js";
import { checkTextSize, checkTomlBounds } from "./toml-bounds.js";
import { nodeSchema, type SettingsOutput, settingsSchema } from "./settings-schema.js";
import { SpecError } from "./spec-error.js";
import { patterns } from "./patterns.js";
import { controlNodeName } from "./control-node.js";
import { isLoopbackAddress } from "./loopback.js";
import { parseSize } from "./size.js";
import type { NodeEntry, ParseResult, Settings, SpecIssue } from "./types.js";

/** Parse settings text. `file` names the source in issues and anchors relative paths. */
export function parseSettings(text: string, file: string): ParseResult<Settings> {
  const oversized = checkTextSize(text, file, maxSettingsBytes, "settings file");
  if (oversized !== undefined) return { ok: false, issues: [oversized] };
  const toml = readToml(text, file);
  if (!toml.ok) return { ok: false, issues: [toml.issue] };
  // Bounded before anything walks the data recursively (zod, the locator, the checks below).
  const unbounded = checkTomlBounds(toml.data, text, file);
  if (unbounded !== undefined) return { ok: false, issues: [unbounded] };
  const locator = locateKeys(text);
  const parsed = settingsSchema.safeParse(toml.data, { error: describeZodIssue });
  const issues = parsed.success ? [] : fromZodIssues(file, locator, parsed.error.issues, (path) => listAllowedKeys(settingsSchema, path));
  issues.push(...checkSettings(toml.data, file, locator));
  if (issues.length > 0 || !parsed.success) return { ok: false, issues: sortIssues(issues) };
  return { ok: true, value: deepFreeze(normaliseSettings(parsed.data, file)), issues: [] };
}

/**
 * Read and parse a settings file. Throws ShardctlError `SettingsNotFound`, or SpecError
 * `InvalidSettings` carrying `issues`, or SpecError `NotRegularFile` / `FileTooLarge` (one issue at
 * 1:1) for a FIFO, directory or device, or a file over the 4 MiB cap — never a read that blocks.
 */
export async function loadSettings(file: string): Promise<Settings> {
  let text: string;
  try {
    text = await readSettingsText(file);
  } catch (error) {
    if (error instanceof FileRefusedError) throw new SpecError(error.reason, [{ file, line: 1, col: 1, path: "", message: error.detail }]);
    const code = (error as NodeJS.ErrnoException).code;
    const reason = code === "ENOENT" ? "SettingsNotFound" : "SettingsUnreadable";
    const detail = code === "ENOENT" ? "not found (pass --config <file> or create shardctl.toml)" : String(error);
    throw new ShardctlError(reason, `${file}: ${detail}`, { terminal: true, cause: error });
  }
  const result = parseSettings(text, file);
  if (!result.ok) throw new SpecError("InvalidSettings", result.issues);
  return result.value;
}

/** Checks that span fields, run on the raw data so they report alongside schema issues. */
function checkSettings(data: unknown, file: string, locator: Locator): SpecIssue[] {
  const issues: SpecIssue[] = [];
  if (getRaw(data, ["router", "kind"]) === "continuum" && getRaw(data, ["router", "config"]) === undefined) {
    issues.push(makeIssue(file, locator, ["router", "config"], 'is required when router.kind is "continuum"', "key"));
  }
  // The embedded router serves router.config; clusters registered through an admin API would never
  // reach it (every request 404 while the status said Registered).
  if (getRaw(data, ["router", "embedded"]) === true && getRaw(data, ["router", "admin_url"]) !== undefined) {
    issues.push(
      makeIssue(
        file,
        locator,
        ["router", "admin_url"],
        "cannot be set with router.embedded = true: the embedded router serves router.config, where clusters are registered without an admin API; remove admin_url, or set embedded = false to register with the router at admin_url",
        "key",
      ),
    );
  }
  // The dashboard's one action must not be open to a network: off loopback it needs a token.
  const uiAddress = getString(data, ["daemon", "ui_address"], patterns.hostPort);
  if (uiAddress !== undefined && !isLoopbackAddress(uiAddress) && getRaw(data, ["daemon", "ui_token_env"]) === undefined) {
    issues.push(
      makeIssue(file, locator, ["daemon", "ui_token_env"], `is required when daemon.ui_address (${JSON.stringify(uiAddress)}) is not a loopback address`, "key"),
    );
  }
  const nodes = getRaw(data, ["nodes"]);
  if (!isTable(nodes)) return issues;
  for (const name of Object.keys(nodes)) {
    if (name === controlNodeName) {
      const message = `"${controlNodeName}" is reserved for the control machine (the coordinator's default node, its models in [daemon] state_dir); rename this node`;
      issues.push(makeIssue(file, locator, ["nodes", name], message, "key"));
    }
    // zod skips the entry of a key it refused; check the entry anyway so every problem shows at once.
    if (!patterns.name.test(name)) {
      const entry = nodeSchema.safeParse(nodes[name], { error: describeZodIssue });
      if (!entry.success) {
        const prefixed = entry.error.issues.map((issue) => ({ ...issue, path: ["nodes", name, ...issue.path] }));
        issues.push(...fromZodIssues(file, locator, prefixed, (path) => listAllowedKeys(settingsSchema, path)));
      }
    }
    const host = getString(nodes, [name, "host"], patterns.host);
    const modelDir = getString(nodes, [name, "model_dir"], patterns.path);
    if (host !== undefined && host !== "local" && modelDir !== undefined && !isPortablePath(modelDir)) {
      // A typo of "local" makes the node remote: the host is then what to fix, not the folder.
      const meantLocal = isNearLocal(host) ? ` (host = ${JSON.stringify(host)} makes it one: did you mean "local"?)` : "";
      issues.push(
        makeIssue(file, locator, ["nodes", name, "model_dir"], `${JSON.stringify(modelDir)} is relative: on a remote node use an absolute or "~/" path${meantLocal}`),
      );
    }
    const memory = getRaw(nodes, [name, "memory"]);
    const limit = getRaw(nodes, [name, "memory_limit"]);
    // Only two sizes compare: a missing or malformed one has its own issue (or none to have).
    const limitBytes = trySize(limit);
    const memoryBytes = trySize(memory);
    if (limitBytes !== undefined && memoryBytes !== undefined && memoryBytes >= 0 && limitBytes > memoryBytes) {
      const message = `${JSON.stringify(limit)} exceeds the declared memory ${JSON.stringify(memory)}`;
      issues.push(makeIssue(file, locator, ["nodes", name, "memory_limit"], message));
    }
  }
  return issues;
}

function trySize(value: unknown): number | undefined {
  if (typeof value === "number" && Number.isSafeInteger(value)) return value;
  if (typeof value !== "string") return undefined;
  try {
    return parseSize(value);
  } catch {
    return undefined;
  }
}

/** The schema's snake_case output → camelCase Settings, relative control-machine paths resolved. */
function normaliseSettings(raw: SettingsOutput, file: string): Settings {
  const dir = dirname(resolve(file));
  const nodes: Record<string, NodeEntry> = {};
  for (const [name, n] of Object.entries(raw.nodes)) {
    const local = n.host === "local";
    nodes[name] = dropUndefined({
      name,
      host: n.host,
      local,
      user: n.user,
      port: n.port,
      identityFile: n.identity_file === undefined ? undefined : resolveLocalPath(dir, n.identity_file),
      hostKeyPolicy: n.host_key_policy,
      modelDir: local ? resolveLocalPath(dir, n.model_dir) : n.model_dir,
      memory: n.memory,
      memoryLimit: n.memory_limit,
      accelerator: n.accelerator,
      engineVersion: n.engine_version,
    });
  }
  return {
    file,
    dir,
    distributed: {
      enabled: raw.distributed.enabled,
      transportBackend: raw.distributed.transport_backend,
      portRange: parsePortRange(raw.distributed.port_range),
    },
    hub: { endpoint: raw.hub.endpoint, tokenEnv: raw.hub.token_env },
    router: dropUndefined({
      kind: raw.router.kind,
      config: raw.router.config === undefined ? undefined : resolveLocalPath(dir, raw.router.config),
      embedded: raw.router.embedded,
      adminUrl: raw.router.admin_url,
      adminTokenEnv: raw.router.admin_token_env,
      adminPaths: raw.router.admin_paths === undefined ? undefined : dropUndefined(raw.router.admin_paths),
      healthUrl: raw.router.health_url,
      weight: raw.router.weight,
      upstreamIdleSeconds: raw.router.upstream_idle_seconds,
    }),
    daemon: dropUndefined({
      resyncSeconds: raw.daemon.resync_seconds,
      heartbeatSeconds: raw.daemon.heartbeat_seconds,
      restartBudget: raw.daemon.restart_budget,
      restartBudgetResetSeconds: raw.daemon.restart_budget_reset_seconds,
      cutOffGraceSeconds: raw.daemon.cut_off_grace_seconds,
      allowMassPrune: raw.daemon.allow_mass_prune,
      stateDir: resolveLocalPath(dir, raw.daemon.state_dir),
      metricsAddress: raw.daemon.metrics_address,
      uiAddress: raw.daemon.ui_address,
      uiTokenEnv: raw.daemon.ui_token_env,
    }),
    ssh: dropUndefined({
      knownHosts: raw.ssh.known_hosts === undefined ? undefined : resolveLocalPath(dir, raw.ssh.known_hosts),
      config: raw.ssh.config === undefined ? undefined : resolveLocalPath(dir, raw.ssh.config),
    }),
    nodes,
  };
}

/** Optional fields are absent rather than undefined, so values compare and hash cleanly. */
export function dropUndefined<T extends object>(value: T): T {
  for (const key of Object.keys(value) as (keyof T)[]) if (value[key] === undefined) delete value[key];
  return value;
}
