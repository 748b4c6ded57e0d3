/**
 * What every command starts from: the settings file (`--config`, default ./shardctl.toml) and the
 * directory of cluster definitions (`--dir`, default clusters/ beside the settings file). A cluster
 * is named by its name (`llama`) or its file (`clusters/llama.toml`).
 */
import { entryExists, pathExists } from "../files/index.js";
import { dirname, join, resolve } from "node:path";
import { loadSettings, type Settings } from "../spec/index.js";
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
    throw new UsageError(looksLikeFile ? `${ref}: no such definition file` : `no cluster "${ref}": ${file} does not exist`);
  }
  return file;
}
