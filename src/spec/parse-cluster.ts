/** `clusters/<name>.toml` → `ClusterSpec`: TOML, then the schema, then the checks against the settings. */
import { basename } from "node:path";
import { engineOf } from "../engines/index.js";
import { quoteText } from "../errors/index.js";
import { FileRefusedError } from "../files/index.js";
import { type ClusterOutput, clusterSchema } from "./cluster-schema.js";
import { checkEngine } from "./check-engine.js";
import { describeOpenFailure } from "./describe-open-failure.js";
import { describeZodIssue, fromZodIssues, makeIssue, sortIssues } from "./issues.js";
import { type Locator, locateKeys } from "./locate.js";
import { resolveLocalPath } from "./local-path.js";
import { allowed, patterns, quote } from "./patterns.js";
import { checkPortRange, countPorts, parsePortRange } from "./port-range.js";
import { dropUndefined } from "./parse-settings.js";
import { deepFreeze, getRaw, getString } from "./raw.js";
import { maxDefinitionBytes, readClusterText } from "./read-spec-file.js";
import { readToml } from "./read-toml.js";
import { listAllowedKeys } from "./schema-keys.js";
import { checkTextSize, checkTomlBounds } from "./toml-bounds.js";
import type { ClusterSpec, ParseResult, Settings, SpecIssue } from "./types.js";

/** Parse a cluster definition. `file` names it in issues and gives the default name (its stem). */
export function parseCluster(text: string, file: string, settings: Settings): ParseResult<ClusterSpec> {
  const oversized = checkTextSize(text, file, maxDefinitionBytes, "cluster definition");
  if (oversized !== undefined) return { ok: false, issues: [oversized] };
  const toml = readToml(text, file);
  if (!toml.ok) return { ok: false, issues: [toml.issue] };
  // Bounded before anything walks the data recursively (zod, the locator, the checks below).
  const unbounded = checkTomlBounds(toml.data, text, file);
  if (unbounded !== undefined) return { ok: false, issues: [unbounded] };
  const locator = locateKeys(text);
  const parsed = clusterSchema.safeParse(toml.data, { error: describeZodIssue });
  const issues = parsed.success ? [] : fromZodIssues(file, locator, parsed.error.issues, (path) => listAllowedKeys(clusterSchema, path));
  issues.push(...checkCluster(toml.data, file, settings, locator));
  if (issues.length > 0 || !parsed.success) return { ok: false, issues: sortIssues(issues) };
  return { ok: true, value: deepFreeze(normaliseCluster(parsed.data, file, settings)), issues: [] };
}

/**
 * Read and parse a cluster definition; an unreadable file is one issue at 1:1, and so is one that is
 * not a regular file (a FIFO would otherwise block the read for ever) or is over the 1 MiB cap.
 */
export async function loadCluster(file: string, settings: Settings): Promise<ParseResult<ClusterSpec>> {
  let text: string;
  try {
    text = await readClusterText(file);
  } catch (error) {
    const detail = error instanceof FileRefusedError ? error.detail : await describeOpenFailure(file, error);
    return { ok: false, issues: [{ file, line: 1, col: 1, path: "", message: detail }] };
  }
  return parseCluster(text, file, settings);
}

/** The longest Hub repository id ("org/name"), characters: the Hub's own limit. */
const maxHubRepoIdChars = 96;

/** The cluster name a file gives by its stem (`clusters/llama.toml` → `llama`). */
export function stemOf(file: string): string {
  return basename(file).replace(/\.toml$/, "");
}

/** Checks that span fields or need the registry; on raw data so they report alongside schema issues. */
function checkCluster(data: unknown, file: string, settings: Settings, locator: Locator): SpecIssue[] {
  const issues: SpecIssue[] = [];
  const add = (path: (string | number)[], message: string, at: "key" | "value" = "value"): void => {
    issues.push(makeIssue(file, locator, path, message, at));
  };
  const registered = Object.keys(settings.nodes);
  const registeredList = registered.length === 0 ? `no nodes are registered in ${settings.file}` : `registered: ${registered.join(", ")}`;

  // The status file is named after the file, so a different `name` would split one cluster in two.
  const stem = stemOf(file);
  const name = getString(data, ["name"], patterns.name);
  if (name !== undefined && name !== stem) {
    add(["name"], `${JSON.stringify(name)} differs from the file name ${quoteText(basename(file))}; rename the file or drop the key`);
  } else if (getRaw(data, ["name"]) === undefined && (!patterns.name.test(stem) || stem.length > 63)) {
    const why = patterns.name.test(stem) ? `${stem.length} characters, more than a cluster name's 63` : `expected ${allowed.name}`;
    issues.push({ file, line: 1, col: 1, path: "", message: `file name ${quoteText(basename(file))} is not a valid cluster name: ${why}` });
  }

  const nodes = getRaw(data, ["nodes"]);
  const stageCount = Array.isArray(nodes) ? nodes.length : 0;
  if (Array.isArray(nodes)) {
    const seen = new Map<string, number>();
    nodes.forEach((node: unknown, index) => {
      if (typeof node !== "string" || !patterns.name.test(node)) return;
      const first = seen.get(node);
      if (first !== undefined) add(["nodes", index], `duplicate node ${quote(node)} (also nodes[${first}]): a node holds one stage`);
      else if (settings.nodes[node] === undefined) add(["nodes", index], `unknown node ${quote(node)} (${registeredList})`);
      if (first === undefined) seen.set(node, index);
    });
  }

  const coordinator = getString(data, ["coordinator", "node"], patterns.name);
  if (coordinator !== undefined && coordinator !== "local" && settings.nodes[coordinator] === undefined) {
    add(["coordinator", "node"], `unknown node ${quote(coordinator)} (${registeredList}; or "local" for this machine)`);
  }

  const source = getRaw(data, ["model", "source"]) ?? "hub";
  const id = getString(data, ["model", "id"], patterns.modelId);
  if (source === "hub" && id !== undefined && !patterns.hubRepo.test(id)) {
    add(["model", "id"], `${JSON.stringify(id)} is not a Hub repository id 'org/name'; for a model directory set source = "path" or "push"`);
  } else if (source === "hub" && id !== undefined && id.length > maxHubRepoIdChars) {
    // Its cache folder (models--org--name) would pass the 255 bytes a file name may have, and the Hub refuses it anyway.
    add(["model", "id"], `${JSON.stringify(id.slice(0, 40))}… is ${id.length} characters; a Hub repository id has at most ${maxHubRepoIdChars}`);
  }

  // Every stage and the coordinator's control address take one transport port.
  const written = getString(data, ["transport", "port_range"]);
  const rangeText = written ?? `${settings.distributed.portRange.first}-${settings.distributed.portRange.last}`;
  if (checkPortRange(rangeText) === undefined && stageCount > 0) {
    const range = parsePortRange(rangeText);
    const needed = stageCount + 1;
    if (countPorts(range) < needed) {
      const origin = written === undefined ? ` (the default from ${settings.file})` : "";
      add(
        written === undefined ? ["nodes"] : ["transport", "port_range"],
        `port range ${rangeText}${origin} holds ${countPorts(range)} ports; ${stageCount} stages and the coordinator need ${needed}`,
      );
    }
    const port = getRaw(data, ["coordinator", "port"]) ?? 8080;
    if (typeof port === "number" && port >= range.first && port <= range.last) {
      add(["coordinator", "port"], `${port} lies inside the transport port range ${rangeText}; choose an HTTP port outside it`);
    }
  }

  // What the engine kind refuses (arguments, a strategy, accelerators): say so before planning.
  checkEngine(data, settings, add);
  return issues;
}

/** The schema's output → camelCase ClusterSpec, with the defaults that come from the settings and the file. */
function normaliseCluster(raw: ClusterOutput, file: string, settings: Settings): ClusterSpec {
  const name = raw.name ?? stemOf(file);
  const id = raw.model.id;
  const lastStageServes = engineOf(raw.engine.kind).readiness.httpServer === "last-stage";
  // A pushed model is read on this machine; a "path" model sits at the same path on every node, so `~/` stays for the node to expand.
  const path = raw.model.source === "hub" ? undefined : raw.model.source === "path" && id.startsWith("~/") ? id : resolveLocalPath(settings.dir, id);
  return {
    file,
    name,
    desired: raw.desired,
    suspend: raw.suspend,
    nodes: raw.nodes,
    model: dropUndefined({
      id,
      path,
      revision: raw.model.revision,
      source: raw.model.source,
      contextLength: raw.model.context_length,
      maxSequences: raw.model.max_sequences,
      files: raw.model.files,
      verify: raw.model.verify,
    }),
    engine: dropUndefined({
      kind: raw.engine.kind,
      binary: raw.engine.binary,
      python: raw.engine.python,
      version: raw.engine.version,
      extraArgs: raw.engine.extra_args,
      loadTimeoutSeconds: raw.engine.load_timeout_seconds,
      generationWatchdogSeconds: raw.engine.generation_watchdog_seconds,
      healthSilenceSeconds: raw.engine.health_silence_seconds,
    }),
    transport: {
      backend: raw.transport.backend ?? settings.distributed.transportBackend,
      portRange: raw.transport.port_range === undefined ? { ...settings.distributed.portRange } : parsePortRange(raw.transport.port_range),
    },
    // An engine whose last stage serves HTTP (mlx-lm's rank 0) serves it from the last node.
    coordinator: { node: lastStageServes ? raw.nodes.at(-1)! : raw.coordinator.node, host: raw.coordinator.host, port: raw.coordinator.port },
    plan: { strategy: raw.plan.strategy, headroom: raw.plan.headroom, allowUnvalidatedFamily: raw.plan.allow_unvalidated_family },
    router: {
      register: raw.router.register,
      backend: raw.router.backend ?? name,
      weight: raw.router.weight ?? settings.router.weight,
    },
  };
}
