/**
 * `shardctl validate [--config shardctl.toml] [paths…]`: schema and semantic validation of definitions
 * and settings. Without paths: the settings file and the definitions directory (`--dir`, default
 * clusters/ beside the settings).
 */
import { lstat, readdir, realpath, stat } from "node:fs/promises";
import { basename, dirname, join, relative, resolve } from "node:path";
import { parseArgs } from "node:util";
import { isShardctlError, messageOf } from "../../errors/index.js";
import { pathExists } from "../../files/index.js";
import {
  definitionsDirMissing,
  findClusterFiles,
  formatIssue,
  holdsSettings,
  loadCluster,
  parseSettings,
  readClusterText,
  readSettingsText,
  type ClusterSpec,
  type SpecIssue,
} from "../../spec/index.js";
import { usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";
import { joinHostPort } from "../../nodes/index.js";

const usage = usageOf("validate");

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({
    args,
    allowPositionals: true,
    options: { config: { type: "string" }, dir: { type: "string" } },
  });
  const configFile = values.config ?? "shardctl.toml";
  const paths = positionals.length > 0 ? positionals : await defaultPaths(configFile, values.dir);

  // The settings come first: every definition is checked against their node registry.
  // A FIFO or an oversized file is refused at once with its located reason; anything else unreadable is a usage error.
  const settingsText = await readSettingsText(configFile).catch((error: unknown) => {
    if (isShardctlError(error)) throw error;
    // No shardctl.toml here: settings files named on the command line can still be checked alone.
    if (values.config === undefined) return undefined;
    throw new UsageError(`${configFile}: cannot read the settings file given with --config (is the path right?)`);
  });

  // A settings file named (or found in a named directory) is validated as settings, never as a
  // definition: the --config file itself, any other file called shardctl.toml, and a file named on
  // the command line that holds settings tables (settings under another name, which as a definition
  // would only show a list of unknown keys). One found in a directory under another name is left a
  // definition, as the daemon takes it.
  const { files: named, given, dirs } = await expandPaths(paths);
  const settings = settingsText === undefined ? undefined : parseSettings(settingsText, configFile);
  const issues: SpecIssue[] = settings === undefined || settings.ok ? [] : [...settings.issues];
  const configPath = settings === undefined ? undefined : await realPathOf(configFile);
  const isSettingsFile = async (file: string): Promise<boolean> =>
    basename(file) === settingsFileName || (await realPathOf(file)) === configPath || (given.has(file) && holdsSettings(await readSettingsText(file).catch(() => "")));
  const definitions: string[] = [];
  const otherSettings = new Set<string>();
  for (const file of named) {
    if (!(await isSettingsFile(file))) definitions.push(file);
    else if ((await realPathOf(file)) !== configPath) otherSettings.add(file);
  }
  // A directory named on the command line that holds no definition (a repository's root, whose
  // definitions are in clusters/; an empty or renamed folder) must not pass having checked nothing.
  // The default directory may be empty: a new repository has no definition yet.
  for (const [dir, found] of positionals.length > 0 ? dirs : new Map<string, string[]>()) {
    if (found.some((file) => definitions.includes(file))) continue;
    const beside = join(dir, "clusters");
    const hint = (await pathExists(beside)) ? `: the definitions are in ${displayPath(beside)}; name that directory` : "";
    throw new UsageError(`${dir}: no cluster definitions (*.toml) in this directory${hint}`);
  }
  if (settings === undefined && definitions.length > 0) {
    throw new UsageError(
      `${configFile}: no settings file here, and cluster definitions are checked against its node registry (pass --config <file>, or create shardctl.toml)`,
    );
  }
  for (const file of otherSettings) {
    // One that cannot be opened (a link to nothing, no permission) is a problem of that file, said
    // in its place like any other, not the end of the run.
    const text = await readSettingsText(file).catch((error: unknown) => error as Error);
    if (text instanceof Error) {
      issues.push({ file, line: 1, col: 1, path: "", message: `cannot read this settings file: ${messageOf(text)}` });
      continue;
    }
    const other = parseSettings(text, file);
    if (!other.ok) issues.push(...other.issues);
  }
  if (settings?.ok === true) {
    const specs: ClusterSpec[] = [];
    for (const file of definitions) {
      const result = await loadCluster(file, settings.value);
      if (!result.ok) issues.push(...result.issues);
      else specs.push(result.value);
    }
    issues.push(...(await sharedCoordinatorAddresses(specs)));
    issues.push(...(await sharedRouterBackends(specs)));
  }

  issues.push(...(await misnamedDefinitions([...dirs.keys()])));
  issues.push(...(await linkedDefinitions(definitions)));

  for (const issue of issues) console.error(formatIssue({ ...issue, file: displayPath(issue.file) }));
  // Definitions are checked against valid settings only: with invalid ones, none was.
  const unchecked = settings !== undefined && !settings.ok;
  const checked = unchecked
    ? plural((settings === undefined ? 0 : 1) + otherSettings.size, "settings file")
    : `${plural((settings === undefined ? 0 : 1) + otherSettings.size, "settings file")}, ${plural(definitions.length, "definition")}`;
  if (issues.length === 0) {
    console.log(`ok: ${checked}`);
    return 0;
  }
  const failed = new Set(issues.map((issue) => issue.file)).size;
  const note = unchecked ? `; its cluster definitions (${definitions.length}) were not checked: they are read against the settings` : "";
  console.error(`${plural(issues.length, "problem")} in ${plural(failed, "file")} (checked ${checked})${note}`);
  return 1;
}

/**
 * What `validate` alone checks: the settings file and the definitions directory the daemon would
 * watch (`--dir`, default clusters/ beside the settings), as `shardctl validate shardctl.toml clusters`.
 * That directory must exist, as the daemon, `status` and `diff` require: a CI job whose folder was
 * renamed must not pass having checked no definition.
 */
async function defaultPaths(configFile: string, dir: string | undefined): Promise<string[]> {
  if (!(await pathExists(configFile))) {
    throw new UsageError(`nothing to check: no ${configFile} here; name the files or directories to check, or pass --config <file>\n${usage}`);
  }
  if (dir !== undefined) return [configFile, dir];
  const clusters = join(dirname(resolve(configFile)), "clusters");
  if (!(await pathExists(clusters))) throw definitionsDirMissing(displayPath(clusters));
  return [configFile, displayPath(clusters)];
}

/** The name every command looks for settings under. */
const settingsFileName = "shardctl.toml";

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "s"}`;
}

/** The real path of a file (symlinks resolved), or its absolute path when it cannot be resolved. */
async function realPathOf(file: string): Promise<string> {
  return realpath(file).catch(() => resolve(file));
}

/**
 * Two definitions whose coordinators listen on the same node, host and port cannot both run: the
 * second launch would only fail at its port check. Said at the `port` key (or the file's top when
 * the default port is used).
 */
function sharedCoordinatorAddresses(specs: readonly ClusterSpec[]): Promise<SpecIssue[]> {
  return sharedSetting(specs, {
    keyOf: (spec) => `${spec.coordinator.node} ${spec.coordinator.host}:${spec.coordinator.port}`,
    at: ["coordinator", "port"],
    message: (spec, others) =>
      `${joinHostPort(spec.coordinator.host, spec.coordinator.port)} on ${spec.coordinator.node} is also the coordinator address of ${others}; give each cluster its own [coordinator] port`,
  });
}

/**
 * Two definitions registered under one router backend name would share one router entry: the second
 * launch would replace the first's address, and either teardown would remove it (the daemon refuses
 * the second launch). Said at the `backend` key (or the file's top when the default, the cluster's
 * name, is used).
 */
function sharedRouterBackends(specs: readonly ClusterSpec[]): Promise<SpecIssue[]> {
  return sharedSetting(
    specs.filter((spec) => spec.router.register),
    {
      keyOf: (spec) => spec.router.backend,
      at: ["router", "backend"],
      message: (spec, others) =>
        `router backend "${spec.router.backend}" is also the backend of ${others}: one router entry cannot route to two clusters; give each its own [router] backend`,
    },
  );
}

/** An issue in each of the definitions that share one value of a setting only one may have, at its key. */
async function sharedSetting(
  specs: readonly ClusterSpec[],
  rule: { keyOf: (spec: ClusterSpec) => string; at: [table: string, key: string]; message: (spec: ClusterSpec, others: string) => string },
): Promise<SpecIssue[]> {
  const groups = new Map<string, ClusterSpec[]>();
  for (const spec of specs) groups.set(rule.keyOf(spec), [...(groups.get(rule.keyOf(spec)) ?? []), spec]);
  const issues: SpecIssue[] = [];
  for (const group of groups.values()) {
    if (group.length < 2) continue;
    for (const spec of group) {
      const others = group
        .filter((s) => s !== spec)
        .map((s) => displayPath(s.file))
        .join(", ");
      // A file renamed away since it was loaded is placed at its top.
      const text = await readClusterText(spec.file).catch(() => "");
      issues.push({ file: spec.file, ...locateKey(text, ...rule.at), path: rule.at.join("."), message: rule.message(spec, others) });
    }
  }
  return issues;
}

/** line:col of `key = …` inside `[table]`, or 1:1 when the key is not written (its default is used). */
function locateKey(text: string, table: string, key: string): { line: number; col: number } {
  const lines = text.split("\n");
  const pattern = new RegExp(`^(\\s*)${key}\\s*=`);
  let inTable = false;
  for (const [i, line] of lines.entries()) {
    const header = /^\s*\[([^\]]+)\]/.exec(line);
    if (header !== null) inTable = header[1]!.trim() === table;
    const found = pattern.exec(line);
    if (inTable && found !== null) return { line: i + 1, col: found[1]!.length + 1 };
  }
  return { line: 1, col: 1 };
}

/** Files as given; directories replaced by their *.toml files. `given`: the files named themselves. */
async function expandPaths(paths: string[]): Promise<{ files: string[]; given: Set<string>; dirs: Map<string, string[]> }> {
  const files: string[] = [];
  const given = new Set<string>();
  const dirs = new Map<string, string[]>();
  for (const path of paths) {
    const info = await stat(path).catch(() => undefined);
    if (info === undefined) throw new UsageError(`${path}: no such file or directory`);
    if (info.isDirectory()) {
      const found = await findClusterFiles(path);
      dirs.set(path, found);
      files.push(...found);
    } else {
      files.push(path);
      given.add(path);
    }
  }
  return { files, given, dirs };
}

/**
 * Files of `dirs` named like a definition but for the case of their extension (`x.TOML`): neither
 * the daemon nor any command reads them, and a cluster committed so would never run, silently.
 */
async function misnamedDefinitions(dirs: string[]): Promise<SpecIssue[]> {
  const issues: SpecIssue[] = [];
  for (const dir of dirs) {
    for (const name of await readdir(dir).catch(() => [] as string[])) {
      if (name.startsWith(".") || name.endsWith(".toml") || !name.toLowerCase().endsWith(".toml")) continue;
      const meant = `${name.slice(0, -".toml".length)}.toml`;
      issues.push({
        file: join(dir, name),
        line: 1,
        col: 1,
        path: "",
        message: `not read as a cluster definition: definition files end in ".toml", lower case; rename it to ${meant}`,
      });
    }
  }
  return issues;
}

/**
 * Definitions that are one file under two names (a symbolic link beside the file it leads to): each
 * name is a cluster of its own, the two ask for the same ports and router backend, and the second
 * is refused for ever with a clash that does not say why.
 */
async function linkedDefinitions(files: readonly string[]): Promise<SpecIssue[]> {
  const byTarget = new Map<string, string[]>();
  for (const file of files) {
    const real = await realpath(file).catch(() => undefined);
    if (real !== undefined) byTarget.set(real, [...(byTarget.get(real) ?? []), file]);
  }
  const issues: SpecIssue[] = [];
  for (const names of byTarget.values()) {
    if (names.length < 2) continue;
    // The links are named, the file itself (if listed) is not: removing the links mends it.
    const links = await Promise.all(names.map(async (file) => ((await lstat(file).catch(() => undefined))?.isSymbolicLink() === true ? file : undefined)));
    for (const link of links.filter((l): l is string => l !== undefined)) {
      const others = names
        .filter((name) => name !== link)
        .map((name) => basename(name))
        .join(", ");
      issues.push({
        file: link,
        line: 1,
        col: 1,
        path: "",
        message: `a link to the same file as ${others}: every definition file is a cluster of its own, so one file under two names is two clusters asking for the same ports and router backend; remove the link, or copy the file and give the copy its own ports and backend`,
      });
    }
  }
  return issues;
}

/** Relative to the working directory when inside it; as typed otherwise. */
function displayPath(file: string): string {
  const rel = relative(process.cwd(), resolve(file));
  return rel.startsWith("..") || rel === "" ? file : rel;
}
