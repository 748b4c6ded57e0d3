/**
 * A local file written to an SFTP server with several writes in flight, as many as the link
 * carries without a long queue. Each write's answer comes back after every byte sent before it, so
 * on a slow link a fixed window (ssh2's fastPut keeps 64 writes of 32 KiB, 2 MiB, in flight) puts
 * seconds of data ahead of the connection's keepalive, and the keepalive, unanswered for its 3 s,
 * drops a connection that is only busy: at 1 Mbit/s every first push of a model failed that way.
 * Here the window adapts to the time a write takes to be answered: it halves when one took over
 * `queueTargetMs` (at most once per window's worth of writes) and grows by one when one took under
 * a quarter of it, between 1 and `maxWritesInFlight`. On a LAN it opens fully at once; on a slow
 * link it settles where the queue ahead of a keepalive stays near a second.
 */
import { read } from "node:fs";
import { open } from "node:fs/promises";
import type { SFTPWrapper } from "ssh2";
import type { PutOptions } from "../types.js";

/** Bytes per write: OpenSSH's sftp-server drops the connection on messages over 256 KiB. */
export const writeBytes = 32 * 1024;
/** The most writes in flight (2 MiB of 32 KiB writes); a partial file's holes all lie within this many writes below its size. */
export const maxWritesInFlight = 64;
/** Writes in flight at the start. */
const initialWrites = 8;
/** A write answered later than this, ms, means the link's queue is too long: the window halves. */
const queueTargetMs = 1_000;

export interface WindowedPut {
  /** Where writing starts, bytes (the file's bytes before it are left as they are). */
  from: number;
  /** "w" truncates or creates the remote file; "r+" writes into an existing one. */
  flags: "w" | "r+";
  /** Bytes written and answered so far, counted from `from`. */
  onProgress?: (bytes: number) => void;
  /** Called with a function that stops reading the local file (the connection dropped under the push). */
  onOpen?: (stop: () => void) => void;
  /** How the local file is read and closed (PutOptions' readLocal and closeLocal). Default fs.read, closed at once. */
  readLocal?: PutOptions["readLocal"];
  closeLocal?: PutOptions["closeLocal"];
}

export async function putWindowed(sftp: SFTPWrapper, localPath: string, remotePath: string, put: WindowedPut): Promise<void> {
  const file = await open(localPath, "r");
  let stopped = false;
  put.onOpen?.(() => {
    stopped = true;
  });
  try {
    const { size } = await file.stat();
    const handle = await new Promise<Buffer>((resolve, reject) => sftp.open(remotePath, put.flags, (error, h) => (error ? reject(error) : resolve(h))));
    await writeAll(sftp, handle, size, put, (buffer, length, position, done) => {
      if (stopped) return done(new Error(`the push of ${localPath} was stopped`));
      // The callback form: a promise per 32 KiB read cost a tenth of a fast link's rate.
      (put.readLocal ?? read)(file.fd, buffer, 0, length, position, (error, bytesRead) => {
        if (error) return done(error);
        done(bytesRead === length ? undefined : new Error(`${localPath} shrank while it was pushed`));
      });
    });
    await new Promise<void>((resolve, reject) => sftp.close(handle, (error) => (error ? reject(error) : resolve())));
  } finally {
    if (put.closeLocal === undefined) await file.close();
    else put.closeLocal(() => file.close());
  }
}

/** Issue the writes of [from, size), keeping the window's worth in flight; resolves when all are answered. */
function writeAll(
  sftp: SFTPWrapper,
  handle: Buffer,
  size: number,
  put: WindowedPut,
  read: (buffer: Buffer, length: number, position: number, done: (error?: Error) => void) => void,
): Promise<void> {
  return new Promise((resolve, reject) => {
    let next = put.from;
    let inFlight = 0;
    let answered = 0;
    let failed = false;
    let window = initialWrites;
    // Writes issued before the last halving answer for the old window: they do not halve it again.
    let cutAt = -1;
    let issued = 0;
    // Buffers of answered writes, taken again by the next ones.
    const spare: Buffer[] = [];
    const fail = (error: unknown): void => {
      if (failed) return;
      failed = true;
      reject(error);
    };
    const pump = (): void => {
      while (!failed && inFlight < window && next < size) {
        const position = next;
        const length = Math.min(writeBytes, size - position);
        const order = issued++;
        next += length;
        inFlight++;
        const buffer = spare.pop() ?? Buffer.allocUnsafe(writeBytes);
        read(buffer, length, position, (readError) => {
          if (readError !== undefined) return fail(readError);
          if (failed) return;
          const sent = performance.now();
          sftp.write(handle, buffer, 0, length, position, (error) => {
            inFlight--;
            if (error) return fail(error);
            spare.push(buffer);
            answered += length;
            put.onProgress?.(answered);
            const tookMs = performance.now() - sent;
            if (tookMs > queueTargetMs && order > cutAt) {
              window = Math.max(1, window >> 1);
              cutAt = issued - 1;
            } else if (tookMs < queueTargetMs / 4) window = Math.min(maxWritesInFlight, window + 1);
            if (next >= size && inFlight === 0) resolve();
            else pump();
          });
        });
      }
    };
    if (put.from >= size) return resolve();
    pump();
  });
}
