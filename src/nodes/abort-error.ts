import { setMaxListeners } from "node:events";
/**
 * What node work stopped by its signal rejects with: an AbortError whose cause is the signal's
 * reason, as a local stream stopped by its signal rejects (callers tell it apart by `name`).
 */
export function abortError(signal: AbortSignal): Error {
  const error = new Error("The operation was aborted", { cause: signal.reason });
  error.name = "AbortError";
  return error;
}

/**
 * Listen once for `signal`'s abort. Node work listens per command on its caller's signal, and
 * callers fan out on one signal (a pass probes every node of a cluster at once): more listeners than
 * Node's default limit of 10 is the design, not a leak, so the signal's warning limit is lifted
 * (a cluster of 11 nodes printed "Possible EventTarget memory leak detected" into the daemon's
 * JSON log every planning pass). Each command removes its listener when it ends.
 */
export function listenForAbort(signal: AbortSignal, listener: () => void): void {
  setMaxListeners(0, signal);
  signal.addEventListener("abort", listener, { once: true });
}

/**
 * `work`'s answer, or `otherwise()` as soon as `signal` aborts (at once if it already has). `work`
 * goes on: its failure after the abort is the caller's to handle. Callers use it where a stop must
 * not wait on a question still out (a node slow to answer, a probe over a slow link).
 */
export function untilAborted<T>(work: Promise<T>, signal: AbortSignal, otherwise: () => T): Promise<T> {
  if (signal.aborted) return Promise.resolve(otherwise());
  let onAbort: (() => void) | undefined;
  const whenAborted = new Promise<T>((resolve) => listenForAbort(signal, (onAbort = () => resolve(otherwise()))));
  return Promise.race([work, whenAborted]).finally(() => signal.removeEventListener("abort", onAbort!));
}
