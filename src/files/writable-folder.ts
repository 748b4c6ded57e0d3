/**
 * Whether this process can create files in a folder, tried for real: a file created and removed.
 * access(2) says yes to root on a folder a read-only mount still refuses, and an answer from the
 * permission bits alone misses ACLs and mounts both ways.
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
