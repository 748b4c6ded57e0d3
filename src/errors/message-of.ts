/** The message of anything thrown: an Error's message, or the value itself as text. */
export function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * The message and, when the error has one, its cause's: fetch's "fetch failed" says nothing
 * without the cause ("connect ECONNREFUSED 127.0.0.1:9", "getaddrinfo ENOTFOUND …").
 */
export function messageWithCauseOf(error: unknown): string {
  const cause = error instanceof Error ? error.cause : undefined;
  return cause instanceof Error ? `${messageOf(error)}: ${cause.message}` : messageOf(error);
}

/**
 * What JSON.parse found wrong, without the text it quotes in some messages (V8: `Unexpected token
 * 'p', "password=h"... is not valid JSON`): the file may be one its reader may read and its asker
 * may not (a model path given to the dashboard's plan preview names any file the daemon can read).
 */
export function jsonErrorOf(error: unknown): string {
  return messageOf(error).replace(/, ".*"(\.\.\.)? is not valid JSON$/s, "");
}
