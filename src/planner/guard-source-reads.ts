/**
 * Reads of a model directory on the daemon's machine: one at a time per directory, each within a
 * deadline. A file system that hangs (a network mount whose server froze or went away) never
 * returns a read, and each hung read holds one of Node's four file-system threads for as long as
 * it lasts: four passes reading one frozen mount stopped every file operation of the daemon — the
 * status files of every cluster, its lock, its ledger. One at a time, a hung directory holds one
 * thread; past the deadline, its reads fail at once, saying so, until the hung one returns.
 */
import { ShardctlError } from "../errors/index.js";

/** How long one read of a model directory may take before its file system is said to hang, ms. */
export const sourceReadDeadlineMs = 30_000;

type Hung = { file: string; sinceMs: number };

/** Per directory: the read that passed its deadline and has not returned. */
const hungReads = new Map<string, Hung>();
/** Per directory: settles when the read ahead of the next one returns or passes its deadline. */
const turns = new Map<string, Promise<void>>();

/** Runs `read` of `file` in directory `root` in its turn, within `deadlineMs` (see the module comment). */
export async function readInTurn<T>(root: string, file: string, read: () => Promise<T>, deadlineMs = sourceReadDeadlineMs): Promise<T> {
  const before = turns.get(root) ?? Promise.resolve();
  let endTurn!: () => void;
  const turn = new Promise<void>((resolve) => (endTurn = resolve));
  turns.set(root, turn);
  try {
    await before;
    const hung = hungReads.get(root);
    if (hung !== undefined) throw hangs(root, hung, file);
    const reading = read();
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        const mark = { file, sinceMs: performance.now() - deadlineMs };
        hungReads.set(root, mark);
        const clear = (): void => void (hungReads.get(root) === mark && hungReads.delete(root));
        reading.then(clear, clear);
        reject(hangs(root, mark, file));
      }, deadlineMs);
    });
    try {
      return await Promise.race([reading, deadline]);
    } finally {
      clearTimeout(timer);
    }
  } finally {
    endTurn();
    if (turns.get(root) === turn) turns.delete(root);
  }
}

function hangs(root: string, hung: Hung, file: string): ShardctlError {
  const seconds = Math.round((performance.now() - hung.sinceMs) / 1000);
  const which = hung.file === file ? hung.file : `${hung.file} (before ${file})`;
  return new ShardctlError(
    "ModelSourceUnreachable",
    `the read of ${which} in the model directory ${root} has not returned for ${seconds} s: the file system holding it does not answer (a network mount whose server is frozen or gone?); ` +
      "nothing else waits on it, and it is tried again with back-off once that read returns",
  );
}
