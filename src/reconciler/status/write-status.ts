import { utimes } from "node:fs/promises";
import { readRegularText, writeFileAtomic } from "../../files/index.js";
import { type ClusterStatus, statusSchema } from "./schema.js";

/** `clusters/llama.toml` → `clusters/llama.status.json`. */
export function statusFileFor(definitionFile: string): string {
  return definitionFile.replace(/\.toml$/, "") + ".status.json";
}

/** The status JSON text: validated, keys in schema order, two-space indented, newline-terminated. */
export function renderStatus(status: ClusterStatus): string {
  return JSON.stringify(statusSchema.parse(status), null, 2) + "\n";
}

/**
 * Write a status file atomically (temp file + rename), and only when its content changes, so
 * an idle daemon never rewrites the file and git sees a change only when something changed; with
 * `touch`, a file already saying it has its modification time set to now instead (a daemon's first
 * word on a cluster, which readers tell from an earlier daemon's by that time). Returns whether the
 * file was written.
 */
export async function writeStatus(file: string, status: ClusterStatus, options: { touch?: boolean } = {}): Promise<boolean> {
  const text = renderStatus(status);
  // Whatever is there and is not a status file of ours (a FIFO, a huge file) is replaced, never read.
  const current = await readRegularText(file, { maxBytes: Buffer.byteLength(text), what: "status file" }).catch(() => undefined);
  if (current === text) {
    if (options.touch !== true) return false;
    const now = new Date();
    // Setting a file's times takes owning it: one a checkout by another user wrote is written anew.
    const touched = await utimes(file, now, now).then(
      () => true,
      () => false,
    );
    if (touched) return false;
  }
  await writeFileAtomic(file, text);
  return true;
}
