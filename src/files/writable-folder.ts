/**
 * Whether this process can create files in a folder, tried for real: a file created and removed.
 * What the permission bits say misses ACLs, mounts and immutable folders, and access(2) answers
 * for the real user id, not the one the process acts as.
 */
import { randomBytes } from "node:crypto";
import { open, unlink } from "node:fs/promises";
import { join } from "node:path";
import { messageOf } from "../errors/index.js";

/** Why this process cannot create a file in `dir` (the system's words), or undefined when it can. */
export async function cannotWriteIn(dir: string): Promise<string | undefined> {
  const probe = join(dir, `.shardctl-write-check.${process.pid}.${randomBytes(4).toString("hex")}`);
  try {
    const handle = await open(probe, "wx", 0o600);
    await handle.close();
  } catch (error) {
    return messageOf(error);
  }
  await unlink(probe).catch(() => undefined);
  return undefined;
}
