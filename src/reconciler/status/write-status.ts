import { readFile } from "node:fs/promises";
import { writeFileAtomic } from "../../files/index.js";
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
 * an idle daemon never touches the file and git sees a change only when something changed.
 * Returns whether the file was written.
 */
export async function writeStatus(file: string, status: ClusterStatus): Promise<boolean> {
  const text = renderStatus(status);
  const current = await readFile(file, "utf8").catch(() => undefined);
  if (current === text) return false;
  await writeFileAtomic(file, text);
  return true;
}

/** Read and validate a status file; undefined when absent. */
export async function readStatus(file: string): Promise<ClusterStatus | undefined> {
  let text: string;
  try {
    text = await readFile(file, "utf8");
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
    throw error;
  }
  return statusSchema.parse(JSON.parse(text));
}
