/**
 * A daemon's own id, kept in its state directory (`daemon-id`, 32 hex digits written once): how the
 * run folders it claims on the nodes know it, whatever the control machine's host name says today
 * (macOS renames itself on a name clash) or however the directory is spelled (a symlink).
 */
import { randomBytes } from "node:crypto";
import { mkdir, readFile } from "node:fs/promises";
import { writeFileAtomic } from "../files/index.js";
import { join } from "node:path";

/** The id in `stateDir`, made on the first start; undefined when the directory takes no file (claims then fall back to host and path). */
export async function daemonIdOf(stateDir: string): Promise<string | undefined> {
  const file = join(stateDir, "daemon-id");
  const kept = (await readFile(file, "utf8").catch(() => "")).trim();
  if (/^[0-9a-f]{32}$/.test(kept)) return kept;
  const id = randomBytes(16).toString("hex");
  try {
    await mkdir(stateDir, { recursive: true });
    // A temporary file of a name nobody can guess, created exclusively (no planted link is followed).
    await writeFileAtomic(file, `${id}\n`);
    return id;
  } catch {
    return undefined;
  }
}
