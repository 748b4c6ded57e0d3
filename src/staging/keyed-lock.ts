/**
 * In-process locks keyed by a string: one staging pass at a time touches a given blob, stat cache or
 * snapshot on a given node. The daemon runs several passes at once, and two clusters may stage the
 * same model on one machine; the second waits for the first instead of sharing its partial file.
 */
import type { NodeAccess } from "../nodes/index.js";

const held = new Map<string, Promise<unknown>>();

/**
 * Run `fn` once no other holder of `key` is running. Resolves with `fn`'s value; `waited` says
 * whether another holder ran first (so what `fn` decided before waiting may be stale).
 */
export async function withKeyedLock<T>(key: string, fn: (waited: boolean) => Promise<T>): Promise<T> {
  let waited = false;
  for (let current = held.get(key); current !== undefined; current = held.get(key)) {
    waited = true;
    await current.catch(() => undefined);
  }
  // No await between the check above and the set below: nobody else can slip in.
  const run = fn(waited);
  held.set(key, run);
  try {
    return await run;
  } finally {
    if (held.get(key) === run) held.delete(key);
  }
}

/** Whether a holder of `key` runs now (one who asks for it waits). */
export function isKeyedLockHeld(key: string): boolean {
  return held.has(key);
}

/** Which machine a node is: the control machine, or user@host:port over SSH (port default 22). */
export function machineKey(node: NodeAccess): string {
  if (node.kind === "local") return "local";
  return `${node.config.user ?? ""}@${node.config.host}:${node.config.port ?? 22}`;
}
