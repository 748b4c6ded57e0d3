/**
 * Text someone else wrote (a file name, a TOML key, a remote command's output, an engine's log
 * line), made safe to print: a terminal acts on control characters (ESC starts a sequence that can
 * recolour, retitle, move the cursor or rewrite what was printed before; C1's CSI does the same on
 * some terminals) and bidirectional overrides reorder what is shown, so each is printed as its
 * `\u` escape instead. Everything else, every other script included, stays as written.
 */

/** C0 and C1 controls and DEL, the bidirectional embeddings, overrides, isolates and marks, and the Unicode line separators. */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const unsafe = /[\u0000-\u001f\u007f-\u009f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g;

const unsafeOne = new RegExp(unsafe.source);

/** `text` with every unsafe character as `\uXXXX`; with `keepLines`, newlines and tabs stay (multi-line output). */
export function showText(text: string, options: { keepLines?: boolean } = {}): string {
  return text.replace(unsafe, (c) => (options.keepLines === true && (c === "\n" || c === "\t") ? c : escapeChar(c)));
}

/**
 * `value` as JSON (a string in double quotes), every unsafe character escaped (JSON itself leaves
 * DEL, C1 and the bidi controls raw): text someone else wrote, quoted into a message, stays one
 * piece on one line, whatever line breaks or terminal sequences it holds. Any JSON value is taken
 * (a config.json field that should have been a number); undefined is shown as the word.
 */
export function quoteText(value: unknown): string {
  return showText(JSON.stringify(value) ?? String(value));
}

/** Whether `text` holds a character `showText` would escape (newlines and tabs included). */
export function hasUnsafeChar(text: string): boolean {
  return unsafeOne.test(text);
}

/** The first unsafe character of `text` as `U+XXXX`, or undefined. */
export function firstUnsafeChar(text: string): string | undefined {
  const found = unsafeOne.exec(text)?.[0];
  return found === undefined ? undefined : `U+${found.charCodeAt(0).toString(16).toUpperCase().padStart(4, "0")}`;
}

function escapeChar(c: string): string {
  return `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`;
}

/**
 * The longest message a status file, a log line or a table keeps, characters (4096): a message is
 * built from what others wrote (an engine's version line, its log, a node's error) and one of
 * megabytes would make the status file too large for `shardctl status` and `wait` to read.
 */
export const maxMessageChars = 4096;

/** `text` cut to `chars` characters (default maxMessageChars), saying so when cut. */
export function clipText(text: string, chars = maxMessageChars): string {
  return text.length <= chars ? text : `${text.slice(0, chars)}… (cut to ${chars} characters)`;
}

/**
 * A message cut to about maxMessageChars characters in its middle, saying how much: its first
 * three quarters and its last quarter stay. A message names what failed first and why last (a node's
 * error after a path of thousands of characters), and a cut that kept only the head lost the cause.
 */
export function clipMessage(text: string): string {
  if (text.length <= maxMessageChars) return text;
  const tail = maxMessageChars / 4;
  const head = maxMessageChars - tail;
  return `${text.slice(0, head)}… (${text.length - head - tail} characters cut) …${text.slice(-tail)}`;
}
