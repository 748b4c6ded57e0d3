/** `shardctl validate [--config shardctl.toml] <paths…>`: schema and semantic validation of definitions. */
import { readFile, stat } from "node:fs/promises";
import { relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { findClusterFiles, formatIssue, loadCluster, parseSettings, type ClusterSpec, type SpecIssue } from "../../spec/index.js";
import { UsageError } from "../usage-error.js";

export const summary = "check cluster definitions and settings; print every problem as file:line:col";

const usage = `usage: shardctl validate [--config shardctl.toml] <file|dir>...
  Directories contribute their *.toml files (not recursive). Definitions are checked against the
  node registry of the settings file, which is validated too. Exit 0 when all valid, 1 otherwise.`;

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { config: { type: "string" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  if (positionals.length === 0) throw new UsageError(`expected at least one file or directory\n${usage}`);
  const configFile = values.config ?? "shardctl.toml";

  // The settings come first: every definition is checked against their node registry.
  const settingsText = await readFile(configFile, "utf8").catch(() => {
    throw new UsageError(`${configFile}: cannot read the settings file (pass --config <file> or create shardctl.toml)`);
  });
  const settings = parseSettings(settingsText, configFile);
  const issues: SpecIssue[] = settings.ok ? [] : [...settings.issues];

  // The settings file itself, when named (or found in a named directory), is not a cluster definition.
  const definitions = (await expandPaths(positionals)).filter((file) => resolve(file) !== resolve(configFile));
  if (settings.ok) {
    const specs: ClusterSpec[] = [];
    for (const file of definitions) {
      const result = await loadCluster(file, settings.value);
      if (!result.ok) issues.push(...result.issues);
      else specs.push(result.value);
    }
    issues.push(...(await sharedCoordinatorAddresses(specs)));
  }

  for (const issue of issues) console.error(formatIssue({ ...issue, file: displayPath(issue.file) }));
  const fileCount = definitions.length + 1;
  if (issues.length === 0) {
    console.log(`ok: ${fileCount} files`);
    return 0;
  }
  const failed = new Set(issues.map((issue) => issue.file)).size;
  const note = settings.ok ? "" : "; cluster definitions were not checked because the settings are invalid";
  console.error(`${issues.length} problem${issues.length === 1 ? "" : "s"} in ${failed} of ${fileCount} files${note}`);
  return 1;
}

/**
 * Two definitions whose coordinators listen on the same node, host and port cannot both run: the
 * second launch would only fail at its port check. Said here, at the `port` key (or the file's top
 * when the default port is used).
 */
async function sharedCoordinatorAddresses(specs: readonly ClusterSpec[]): Promise<SpecIssue[]> {
  const byAddress = new Map<string, ClusterSpec[]>();
  for (const spec of specs) {
    const key = `${spec.coordinator.node} ${spec.coordinator.host}:${spec.coordinator.port}`;
    byAddress.set(key, [...(byAddress.get(key) ?? []), spec]);
  }
  const issues: SpecIssue[] = [];
  for (const group of byAddress.values()) {
    if (group.length < 2) continue;
    for (const spec of group) {
      const others = group
        .filter((s) => s !== spec)
        .map((s) => displayPath(s.file))
        .join(", ");
      const text = await readFile(spec.file, "utf8");
      const at = locateCoordinatorPort(text);
      issues.push({
        file: spec.file,
        ...at,
        path: "coordinator.port",
        message: `${spec.coordinator.host}:${spec.coordinator.port} on ${spec.coordinator.node} is also the coordinator address of ${others}; give each cluster its own [coordinator] port`,
      });
    }
  }
  return issues;
}

/** line:col of `port = …` inside `[coordinator]`, or 1:1 when the default is used. */
function locateCoordinatorPort(text: string): { line: number; col: number } {
  const lines = text.split("\n");
  let inCoordinator = false;
  for (const [i, line] of lines.entries()) {
    const header = /^\s*\[([^\]]+)\]/.exec(line);
    if (header !== null) inCoordinator = header[1]!.trim() === "coordinator";
    const key = /^(\s*)port\s*=/.exec(line);
    if (inCoordinator && key !== null) return { line: i + 1, col: key[1]!.length + 1 };
  }
  return { line: 1, col: 1 };
}

/** Files as given; directories replaced by their *.toml files. */
async function expandPaths(paths: string[]): Promise<string[]> {
  const out: string[] = [];
  for (const path of paths) {
    const info = await stat(path).catch(() => undefined);
    if (info === undefined) throw new UsageError(`${path}: no such file or directory`);
    if (info.isDirectory()) out.push(...(await findClusterFiles(path)));
    else out.push(path);
  }
  return out;
}

/** Relative to the working directory when inside it; as typed otherwise. */
function displayPath(file: string): string {
  const rel = relative(process.cwd(), resolve(file));
  return rel.startsWith("..") || rel === "" ? file : rel;
}
