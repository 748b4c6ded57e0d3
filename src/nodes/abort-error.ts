/**
 * What node work stopped by its signal rejects with: an AbortError whose cause is the signal's
 * reason, as a local stream stopped by its signal rejects (callers tell it apart by `name`).
 */
export function abortError(signal: AbortSignal): Error {
  const error = new Error("The operation was aborted", { cause: signal.reason });
  error.name = "AbortError";
  return error;
}
