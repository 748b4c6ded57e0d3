/**
 * What every command starts from: the settings file (`--config`, default ./shardctl.toml) and the
 * directory of cluster definitions (`--dir`, default clusters/ beside the settings file). A cluster
 * is named by its name (`llama`) or its file (`clusters/llama.toml`).
 */
import { basename, dirname, join, resolve } from "node:path";
import { closestName } from "../errors/index.js";
import { entryExists, pathExists } from "../files/index.js";
import { findClusterFiles, loadSettings, type Settings } from "../spec/index.js";
import { UsageError } from "./usage-error.js";

export interface CommandContext {
  settings: Settings;
  /** Absolute path of the watched directory of definitions. */
  clustersDir: string;
}

/** The options every command shares, for node:util parseArgs. */
export const contextOptions = {
  config: { type: "string" },
  dir: { type: "string" },
} as const;

export async function loadContext(options: { config?: string; dir?: string }): Promise<CommandContext> {
  const configFile = options.config ?? "shardctl.toml";
  if (!(await pathExists(configFile))) {
    throw new UsageError(`${configFile}: no settings file here; pass --config <file> or run where shardctl.toml is`);
  }
  const settings = await loadSettings(configFile);
  const clustersDir = resolve(options.dir ?? join(dirname(resolve(configFile)), "clusters"));
  return { settings, clustersDir };
}

/** The definition file of a cluster named by name or by file. */
export async function resolveClusterFile(ref: string, clustersDir: string): Promise<string> {
  const looksLikeFile = ref.endsWith(".toml") || ref.includes("/");
  const file = looksLikeFile ? ref : join(clustersDir, `${ref}.toml`);
  // A symbolic link to nothing is named on: reading it says where the link points.
  if (!(await entryExists(file))) {
    if (looksLikeFile) throw new UsageError(`${ref}: no such definition file`);
    const names = (await findClusterFiles(clustersDir).catch(() => [] as string[])).map((f) => basename(f, ".toml"));
    const guess = closestName(ref, names);
    throw new UsageError(`no cluster "${ref}": ${file} does not exist${guess === undefined ? "" : ` (did you mean ${guess}?)`}`);
  }
  return file;
}
