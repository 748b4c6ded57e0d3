/** `shardctl reconcile <name>`: ask the daemon for a pass now, with a fresh restart budget. */
import { mkdir, rename, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { requestsDirOf } from "../../reconciler/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { UsageError } from "../usage-error.js";

export const summary = "ask the daemon to reconcile a cluster now (resets its restart budget)";

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...contextOptions } });
  if (positionals.length !== 1) throw new UsageError("usage: shardctl reconcile <name|file> [--config shardctl.toml] [--dir clusters]");
  const context = await loadContext(values);
  const name = basename(await resolveClusterFile(positionals[0]!, context.clustersDir), ".toml");
  // The daemon watches this directory; the request is dropped in atomically.
  const dir = requestsDirOf(context.settings);
  await mkdir(dir, { recursive: true });
  await writeFile(join(dir, `${name}.tmp`), new Date().toISOString());
  await rename(join(dir, `${name}.tmp`), join(dir, name));
  console.log(`requested a pass of ${name}`);
  return 0;
}
