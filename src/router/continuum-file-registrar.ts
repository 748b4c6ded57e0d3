/**
 * The default continuum registrar: keeps the cluster's backend in the `backends:` list of the
 * router's YAML config file, which continuum-router (and the embedded router) hot-reload.
 */
import { readFile } from "node:fs/promises";
import { resolve } from "node:path";
import { messageOf, ShardctlError, type RouterReason } from "../errors/index.js";
import { editBackendsText, NEW_CONFIG_TEXT, parseConfigDocument, removeBackend, upsertBackend } from "./edit-backends.js";
import type { Document } from "yaml";
import { parseRouterConfig } from "./read-router-config.js";
import { serialise } from "./serialise.js";
import type { BackendEntry, Registrar } from "./types.js";
import { validateBackendEntry } from "./validate-backend-entry.js";
import { writeFileAtomic } from "../files/index.js";

export function createContinuumFileRegistrar(configFile: string): Registrar {
  const file = resolve(configFile);

  // A missing file reads as a fresh one; a broken one is refused, never overwritten.
  const load = async (): Promise<{ text: string; exists: boolean }> => {
    const text = await readFile(file, "utf8").catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    });
    return text === undefined ? { text: NEW_CONFIG_TEXT, exists: false } : { text, exists: true };
  };

  // Apply one edit and write only when the text changes, so the router does not reload for nothing.
  const edit = (reason: RouterReason, change: (doc: Document) => void): Promise<void> =>
    serialise(file, async () => {
      try {
        const { text, exists } = await load();
        const next = editBackendsText(text, change);
        if (next !== text || !exists) await writeFileAtomic(file, next);
      } catch (error) {
        throw new ShardctlError(reason, `cannot update router config ${file}: ${messageOf(error)}`, { cause: error });
      }
    });

  const list = (): Promise<BackendEntry[]> =>
    serialise(file, async () => {
      const { text } = await load();
      try {
        parseConfigDocument(text);
      } catch (error) {
        throw new ShardctlError("RouterConfigInvalid", `${file}: ${(error as Error).message}`, { terminal: true });
      }
      return parseRouterConfig(text, file).backends;
    });

  return {
    register: async (backend) => {
      const entry = validateBackendEntry(backend);
      await edit("RouterRegistrationFailed", (doc) => upsertBackend(doc, entry));
    },
    deregister: (name) => edit("RouterDeregistrationFailed", (doc) => void removeBackend(doc, name)),
    lookup: async (name) => (await list()).find((entry) => entry.name === name),
    list,
  };
}
