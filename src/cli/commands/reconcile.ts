/**
 * `shardctl reconcile <name>`: ask the daemon for a pass now, with a fresh restart budget. Returns
 * once the daemon has taken the request (its status already says so, so a `wait` right after never
 * reads the Stalled the request lifts); exit 1 when no daemon watches the directory.
 */
import { access, mkdir, rename, writeFile } from "node:fs/promises";
import { basename, join } from "node:path";
import { parseArgs } from "node:util";
import { daemonWatching, requestsDirOf } from "../../reconciler/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { UsageError } from "../usage-error.js";

export const summary = "ask the daemon to reconcile a cluster now (resets its restart budget)";

/** How long the daemon gets to take the request, ms. */
const acknowledgeDeadlineMs = 15_000;

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...contextOptions } });
  if (positionals.length !== 1) throw new UsageError("usage: shardctl reconcile <name|file> [--config shardctl.toml] [--dir clusters]");
  const context = await loadContext(values);
  const name = basename(await resolveClusterFile(positionals[0]!, context.clustersDir), ".toml");
  // The daemon watches this directory; the request is dropped in atomically.
  const dir = requestsDirOf(context.settings);
  const request = join(dir, name);
  await mkdir(dir, { recursive: true });
  await writeFile(`${request}.tmp`, new Date().toISOString());
  await rename(`${request}.tmp`, request);
  if ((await daemonWatching(context.clustersDir)) === undefined) {
    console.error(`no shardctl daemon is watching ${context.clustersDir}: the request for ${name} waits for the next daemon to start`);
    return 1;
  }
  const deadline = Date.now() + acknowledgeDeadlineMs;
  while (Date.now() < deadline) {
    if (
      !(await access(request).then(
        () => true,
        () => false,
      ))
    ) {
      console.log(`the daemon took the request: ${name} gets a pass now, with a fresh restart budget`);
      return 0;
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  console.error(`the daemon watching ${context.clustersDir} did not take the request for ${name} within ${acknowledgeDeadlineMs / 1000} s`);
  return 1;
}
