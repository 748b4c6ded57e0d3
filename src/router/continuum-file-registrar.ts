/**
 * The default continuum registrar: keeps the cluster's backend in the `backends:` list of the
 * router's YAML config file, which continuum-router (and the embedded router) hot-reload, and the
 * relaunch marks in the file beside it that the embedded router reads (relaunch-marks.ts).
 */
import { realpath, unlink } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { messageOf, ShardctlError, type RouterReason } from "../errors/index.js";
import { editBackendsText, NEW_CONFIG_TEXT, parseConfigDocument, removeBackend, upsertBackend } from "./edit-backends.js";
import type { Document } from "yaml";
import { maxRouterConfigBytes, parseRouterConfig } from "./read-router-config.js";
import { marksAreEmpty, maxRelaunchFileBytes, noMarks, parseRelaunchMarks, relaunchFileOf, renderRelaunchMarks, type RelaunchMarks } from "./relaunch-marks.js";
import { serialise } from "./serialise.js";
import type { BackendEntry, Registrar } from "./types.js";
import { validateBackendEntry } from "./validate-backend-entry.js";
import { cannotWriteIn, readRegularText, writeFileAtomic } from "../files/index.js";

export function createContinuumFileRegistrar(configFile: string): Registrar {
  const file = resolve(configFile);
  const marksFile = relaunchFileOf(file);

  // The text last read or written: a file removed while the daemon runs (a `git clean`, a checkout)
  // is written again as it was, its server settings and all, not as a fresh one (the router would
  // bind its default address at its next start).
  let lastText: string | undefined;
  // A missing file reads as a fresh one (it lists no backend: a resync registers its clusters again);
  // a broken one is refused, never overwritten; a FIFO or a file over the cap is refused before it
  // is read (the registrar must never block on it).
  const load = async (): Promise<{ text: string; exists: boolean }> => {
    const text = await readRegularText(file, { maxBytes: maxRouterConfigBytes, what: "router config" }).catch((error: NodeJS.ErrnoException) => {
      if (error.code === "ENOENT") return undefined;
      throw error;
    });
    return text === undefined ? { text: NEW_CONFIG_TEXT, exists: false } : { text, exists: true };
  };

  // Apply one edit and write only when the text changes, so the router does not reload for nothing.
  const edit = (reason: RouterReason, change: (doc: Document) => void): Promise<void> =>
    serialise(file, async () => {
      let text: string;
      let exists: boolean;
      let next: string;
      try {
        ({ text, exists } = await load());
        // A file removed while the daemon runs is written again from the last one it read or wrote.
        next = editBackendsText(exists ? text : (lastText ?? text), change);
      } catch (error) {
        throw new ShardctlError(reason, `cannot update router config ${file}: ${messageOf(error)}`, { cause: error });
      }
      try {
        // The config may be a link to the router's real one (kept in another repository or directory).
        if (next !== text || !exists) await writeFileAtomic(file, next, { followLink: true });
      } catch (error) {
        // A folder the daemon's user cannot write in is the router file's surroundings, not the cluster's fault.
        const code = (error as NodeJS.ErrnoException).code;
        const unwritable = code === "EACCES" || code === "EPERM" || code === "EROFS";
        throw new ShardctlError(
          unwritable && reason === "RouterRegistrationFailed" ? "RouterConfigUnwritable" : reason,
          `cannot update router config ${file}: ${messageOf(error)}${unwritable ? "; the daemon's user must be able to create files in its folder and replace the file (a new file is renamed over it)" : ""}`,
          { cause: error },
        );
      }
      lastText = next;
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

  // Edit the relaunch marks, serialised with the YAML edits under the same key: a mark made before
  // a deregistration is on disk before the backend leaves the YAML, so the router never sees the
  // model unknown in between. Expired marks are dropped; the file goes when the last mark does.
  const editMarks = (change: (marks: RelaunchMarks) => void): Promise<void> =>
    serialise(file, async () => {
      try {
        const text = await readRegularText(marksFile, { maxBytes: maxRelaunchFileBytes, what: "relaunch marks file" }).catch((error: NodeJS.ErrnoException) => {
          if (error.code === "ENOENT") return undefined;
          throw error;
        });
        const marks = text === undefined ? noMarks() : parseOwnMarks(text);
        const now = Date.now();
        for (const [model, until] of marks.relaunching) if (until <= now) marks.relaunching.delete(model);
        change(marks);
        const next = marksAreEmpty(marks) ? undefined : renderRelaunchMarks(marks);
        if (next === text) return;
        if (next !== undefined) await writeFileAtomic(marksFile, next);
        else await unlink(marksFile);
      } catch (error) {
        throw new ShardctlError("RouterRelaunchMarkFailed", `cannot update ${marksFile}: ${messageOf(error)}`, { cause: error });
      }
    });
  // Our own file: one that does not parse (a crash mid-write cannot do that, a hand edit can) is replaced.
  const parseOwnMarks = (text: string): RelaunchMarks => {
    try {
      return parseRelaunchMarks(text, marksFile);
    } catch {
      return noMarks();
    }
  };

  return {
    register: async (backend) => {
      const entry = validateBackendEntry(backend);
      await edit("RouterRegistrationFailed", (doc) => upsertBackend(doc, entry));
      // A backend serves these models again: they are neither coming back nor stalled.
      await editMarks((marks) =>
        entry.models.forEach((model) => {
          marks.relaunching.delete(model);
          marks.stalled.delete(model);
        }),
      );
    },
    deregister: (name) => edit("RouterDeregistrationFailed", (doc) => void removeBackend(doc, name)),
    lookup: async (name) => (await list()).find((entry) => entry.name === name),
    list,
    markRelaunching: (model, untilMs) =>
      editMarks((marks) => {
        marks.relaunching.set(model, untilMs);
        marks.stalled.delete(model);
      }),
    clearRelaunching: (model) => editMarks((marks) => void marks.relaunching.delete(model)),
    markStalled: (model, mark) =>
      editMarks((marks) => {
        marks.stalled.set(model, mark);
        marks.relaunching.delete(model);
      }),
    clearStalled: (model, cluster) =>
      editMarks((marks) => {
        if (marks.stalled.get(model)?.cluster === cluster) marks.stalled.delete(model);
      }),
    clearAllStalled: () => editMarks((marks) => marks.stalled.clear()),
    unwritable: async () => {
      // The link's folder holds the relaunch marks; the folder of the file it leads to, the config's replacement.
      for (const folder of new Set([dirname(file), dirname(await realpath(file).catch(() => file))])) {
        const problem = await cannotWriteIn(folder);
        if (problem !== undefined) return { folder, problem };
      }
      return undefined;
    },
  };
}
