/**
 * A request for a pass now, with a fresh restart budget (`shardctl reconcile <name>`, the
 * dashboard's "Reconcile now"): a file named after the cluster, dropped atomically into the
 * daemon's requests directory. The daemon removes it once its status says the request was taken.
 */
import { access, mkdir } from "node:fs/promises";
import { join } from "node:path";
import { ShardctlError, messageOf } from "../errors/index.js";
import { writeFileAtomic } from "../files/index.js";
import { patterns } from "../spec/index.js";
import { requestsDirOf } from "./daemon.js";

/** Drop the request for `name` where a daemon running with `stateDir` takes them; returns the request file. */
export async function dropReconcileRequest(stateDir: string, name: string): Promise<string> {
  // The name becomes a file name in the requests directory: only a cluster name may (never "..").
  if (!patterns.name.test(name)) throw new Error(`"${name}" is not a cluster name: no reconcile request is made for it`);
  const dir = requestsDirOf(stateDir);
  const request = join(dir, name);
  try {
    await mkdir(dir, { recursive: true });
    // A temporary file of a name nobody can guess, created exclusively: a link planted at a fixed
    // name in a folder others may write would lead this write (root's, often) to any file.
    await writeFileAtomic(request, new Date().toISOString());
  } catch (error) {
    throw new ShardctlError(
      "ReconcileRequestFailed",
      `cannot write the reconcile request for ${name} in ${dir}, where the daemon takes them (${messageOf(error)}): the state directory ([daemon] state_dir) must be writable by whoever asks, and have room`,
      { cause: error },
    );
  }
  return request;
}

/** True once the daemon took the request (removed its file), false when `deadlineMs` passed first; checks every 50 ms. */
export async function requestTaken(request: string, deadlineMs: number): Promise<boolean> {
  const deadline = performance.now() + deadlineMs;
  while (performance.now() < deadline) {
    const present = await access(request).then(
      () => true,
      () => false,
    );
    if (!present) return true;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return false;
}
