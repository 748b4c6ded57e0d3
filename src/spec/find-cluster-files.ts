/** The cluster definitions of a directory. */
import { readdir } from "node:fs/promises";
import { join } from "node:path";

/** `*.toml` files directly in `dir` (not recursive), sorted by name, joined onto `dir`. */
export async function findClusterFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true });
  return entries
    .filter((entry) => entry.isFile() && entry.name.endsWith(".toml"))
    .map((entry) => entry.name)
    .sort()
    .map((name) => join(dir, name));
}
