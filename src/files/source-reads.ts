/**
 * Reads of a model directory on the daemon's machine (the planner's, staging's hashing and its
 * pushes): one at a time per directory, each within a deadline. A file system that hangs (a network
 * mount whose server froze or went away) never returns a read, and each hung read holds one of
 * Node's four file-system threads for as long as it lasts: four passes reading one frozen mount,
 * or four nodes being pushed to from it, stopped every file operation of the daemon — the status
 * files of every cluster, its lock, its ledger. One at a time, a hung directory holds one thread;
 * past the deadline, the read's caller and every read waiting or asked for there fail at once,
 * saying so, until the hung read returns.
 *
 * Two forms share each directory's lane: `readInTurn` for promise-returning work (a header, a
 * listing, a 4 MiB chunk), `readChunkInTurn` for a push's many small reads (the callback form of
 * fs.read: a promise and a timer per 32 KiB read cost a tenth of a fast link's rate). One watchdog
 * timer, running while any read is under way, finds reads past their deadline.
 */
import { read } from "node:fs";
import { ShardctlError } from "../errors/index.js";

/** fs.read's callback form, as a stream or a push calls it (the buffer given back as the third argument). */
export type ChunkRead = (
  fd: number,
  buffer: Buffer,
  offset: number,
  length: number,
  position: number | null,
  done: (error: Error | null, bytesRead: number, buffer: Buffer) => void,
) => void;

/** How long one read of a model directory may take before its file system is said to hang, ms. */
export const sourceReadDeadlineMs = 30_000;

interface Hung {
  file: string;
  sinceMs: number;
}

interface Turn {
  file: string;
  startedMs: number;
  deadlineMs: number;
  /** Called once if the read passes its deadline: its caller is answered then, not when it returns. */
  onHung: (error: ShardctlError) => void;
}

interface Lane {
  active?: Turn;
  waiting: Array<{ file: string; resume: (refused?: ShardctlError) => void }>;
  hung?: Hung;
  /** Closes put off while the lane hung (a close on a frozen mount waits too): done once it answers. */
  closeLater?: Array<{ file: string; close: () => Promise<void> }>;
}

/** Per directory: the read under way, those waiting for it, and the read that passed its deadline. */
const lanes = new Map<string, Lane>();
let watchdog: NodeJS.Timeout | undefined;
/** How often the watchdog looks, ms: a hang is said within a second of its deadline. */
const watchEveryMs = 250;

/** Runs `read` of `file` in directory `root` in its turn, within `deadlineMs` (see the module comment). */
export function readInTurn<T>(root: string, file: string, read: () => Promise<T>, deadlineMs = sourceReadDeadlineMs): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    let answered = false;
    const answer = (settle: () => void): void => {
      if (answered) return;
      answered = true;
      settle();
    };
    takeTurn(
      root,
      file,
      deadlineMs,
      (error) => answer(() => reject(error)),
      (refused) => {
        if (refused !== undefined) return answer(() => reject(refused));
        let reading: Promise<T>;
        try {
          reading = read();
        } catch (error) {
          reading = Promise.reject(error as Error);
        }
        reading.then(
          (value) => {
            endTurn(root);
            answer(() => resolve(value));
          },
          (error: unknown) => {
            endTurn(root);
            answer(() => reject(error as Error));
          },
        );
      },
    );
  });
}

/**
 * fs.read of file `file` in `root`, each call in its turn and within `deadlineMs`; `done` is called
 * once, with the hang's error if the read passes the deadline.
 */
export function readChunkInTurn(root: string, file: string, deadlineMs = sourceReadDeadlineMs): ChunkRead {
  return (fd, buffer, offset, length, position, done) => readChunk(root, file, deadlineMs, fd, buffer, offset, length, position, done);
}

function readChunk(root: string, file: string, deadlineMs: number, ...[fd, buffer, offset, length, position, done]: Parameters<ChunkRead>): void {
  let answered = false;
  const answer = (error: Error | null, bytesRead: number): void => {
    if (answered) return;
    answered = true;
    done(error, bytesRead, buffer);
  };
  takeTurn(
    root,
    file,
    deadlineMs,
    (error) => answer(error, 0),
    (refused) => {
      if (refused !== undefined) return answer(refused, 0);
      read(fd, buffer, offset, length, position, (error, bytesRead) => {
        endTurn(root);
        answer(error, bytesRead);
      });
    },
  );
}

function takeTurn(root: string, file: string, deadlineMs: number, onHung: (error: ShardctlError) => void, go: (refused?: ShardctlError) => void): void {
  const lane = lanes.get(root) ?? { waiting: [] };
  lanes.set(root, lane);
  if (lane.hung !== undefined) return go(hangs(root, lane.hung, file));
  const start = (): void => {
    lane.active = { file, startedMs: performance.now(), deadlineMs, onHung };
    watchdog ??= setInterval(findHungReads, watchEveryMs).unref();
    go();
  };
  if (lane.active === undefined) return start();
  lane.waiting.push({ file, resume: (refused) => (refused === undefined ? start() : go(refused)) });
}

/**
 * Closes a file of `root` in its turn: a close waits on a frozen network mount as a read does (FUSE
 * and NFS flush on close). While the lane hangs, the close is put off until it answers again: the
 * descriptor stays open meanwhile, and no thread waits on it.
 */
export function closeInTurn(root: string, file: string, close: () => Promise<void>): void {
  const lane = lanes.get(root);
  if (lane?.hung !== undefined) {
    (lane.closeLater ??= []).push({ file, close });
    return;
  }
  readInTurn(root, file, close).catch(() => undefined);
}

/** The read under way in `root` returned: the lane opens again (a hang it was said to be is over). */
function endTurn(root: string): void {
  const lane = lanes.get(root);
  if (lane === undefined) return;
  lane.active = undefined;
  lane.hung = undefined;
  const next = lane.waiting.shift();
  if (next !== undefined) return next.resume();
  const closes = lane.closeLater ?? [];
  lane.closeLater = undefined;
  if (closes.length > 0) {
    for (const { file, close } of closes) readInTurn(root, file, close).catch(() => undefined);
    return;
  }
  lanes.delete(root);
  if (lanes.size === 0 && watchdog !== undefined) {
    clearInterval(watchdog);
    watchdog = undefined;
  }
}

function findHungReads(): void {
  const now = performance.now();
  for (const [root, lane] of lanes) {
    const active = lane.active;
    if (active === undefined || lane.hung !== undefined || now - active.startedMs < active.deadlineMs) continue;
    const hung = { file: active.file, sinceMs: active.startedMs };
    lane.hung = hung;
    active.onHung(hangs(root, hung, active.file));
    for (const waiting of lane.waiting.splice(0)) waiting.resume(hangs(root, hung, waiting.file));
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
