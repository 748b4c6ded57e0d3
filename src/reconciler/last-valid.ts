/**
 * The last valid definition of each cluster, kept in the state directory as its text
 * (`<state_dir>/last-valid/<cluster>.toml`): what the daemon goes on keeping while the definition
 * is invalid — also after a restart of its own, when its memory of the last good revision is gone.
 * Written when a new revision parses, removed when the cluster is pruned. The text is parsed again
 * with the settings of the moment, as the definition would be: a last valid definition the
 * settings no longer accept is no fallback.
 */
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { readRegularText, writeFileAtomic } from "../files/index.js";
import { maxDefinitionBytes } from "../spec/index.js";

/** Where the last valid definition of cluster `name` is kept (names are DNS labels: safe as file names). */
export function lastValidFile(stateDir: string, name: string): string {
  return join(stateDir, "last-valid", `${name}.toml`);
}

/** Keep `text` as the last valid definition of `name`. */
export async function saveLastValid(stateDir: string, name: string, text: string): Promise<void> {
  const file = lastValidFile(stateDir, name);
  await mkdir(join(stateDir, "last-valid"), { recursive: true });
  await writeFileAtomic(file, text);
}

/** The kept text, or undefined when none is kept, or it is no regular file or larger than a definition may be. */
export async function readLastValid(stateDir: string, name: string): Promise<string | undefined> {
  return readRegularText(lastValidFile(stateDir, name), { maxBytes: maxDefinitionBytes, what: "last valid definition" }).catch(() => undefined);
}

/** Forget the kept text of a pruned cluster. */
export async function dropLastValid(stateDir: string, name: string): Promise<void> {
  await rm(lastValidFile(stateDir, name), { force: true });
}
