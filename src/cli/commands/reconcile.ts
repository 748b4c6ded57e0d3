/**
 * `shardctl reconcile <name>`: ask the daemon for a pass now, with a fresh restart budget. Returns
 * once the daemon has taken the request (its status already says so, so a `wait` right after never
 * reads the Stalled the request lifts); exit 1 when no daemon watches the directory.
 */
import { basename, dirname, resolve } from "node:path";
import { parseArgs } from "node:util";
import { describeSilence, dropReconcileRequest, findDaemon, requestTaken } from "../../reconciler/index.js";
import { allowed, patterns } from "../../spec/index.js";
import { contextOptions, loadContext, resolveClusterFile } from "../context.js";
import { usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";

/** How long the daemon gets to take the request, ms. */
const acknowledgeDeadlineMs = 15_000;

export async function run(args: string[]): Promise<number> {
  const { values, positionals } = parseArgs({ args, allowPositionals: true, options: { ...contextOptions } });
  if (positionals.length !== 1) throw new UsageError(`expected one cluster\n${usageOf("reconcile")}`);
  const context = await loadContext(values);
  const file = await resolveClusterFile(positionals[0]!, context.clustersDir);
  // The daemon reconciles the definitions of the directory it watches, by name: a file elsewhere
  // would name (and reset the budget of) the watched cluster that has its file name.
  if (resolve(dirname(file)) !== resolve(context.clustersDir)) {
    throw new UsageError(`${file} is not in ${context.clustersDir}, the directory the daemon watches: name a cluster there (or pass --dir)`);
  }
  const name = basename(file, ".toml");
  if (!patterns.name.test(name)) throw new UsageError(`${file}: "${name}" is not a cluster name (${allowed.name}): the daemon has no cluster of that name`);
  // The same request the dashboard's "Reconcile now" makes, where the running daemon takes them
  // (the state directory it started with, should the settings file say another since).
  const daemon = await findDaemon(context.clustersDir);
  const request = await dropReconcileRequest(daemon?.stateDir ?? context.settings.daemon.stateDir, name);
  if (daemon === undefined) {
    console.error(
      `no shardctl daemon is watching ${context.clustersDir}, so nothing acts on ${name} now: the request is kept, and the next daemon to start there takes it (start one: shardctl daemon, or shardctl service install)`,
    );
    return 1;
  }
  if (daemon.silent) {
    console.error(
      `the shardctl daemon watching ${context.clustersDir} is silent (${describeSilence(daemon)}), so nothing acts on ${name} now: the request is kept until it runs again`,
    );
    return 1;
  }
  if (await requestTaken(request, acknowledgeDeadlineMs)) {
    console.log(`the daemon took the request: ${name} gets a pass now, with a fresh restart budget`);
    return 0;
  }
  console.error(
    `the daemon watching ${context.clustersDir} did not take the request for ${name} within ${acknowledgeDeadlineMs / 1000} s (stopping, or busy): the request is kept, and that daemon or the next one takes it`,
  );
  return 1;
}
