/**
 * The text of a completion as its tokens arrive, at a cost per token that does not grow with the
 * completion. Decoding the whole token list again for every token costs about 10 µs per token
 * with the tokenizer library used here, so at 1000 tokens the coordinator would spend 10 ms a
 * token on it — longer than computing the token. Each token instead decodes a window: a few
 * tokens before it, whose text is settled, and the new ones; the text is the settled text plus
 * what the window's decode adds.
 *
 * This is exactly the decode of the whole list for decoders that work token by token (byte-level
 * BPE; SentencePiece's "▁" spaces, byte fallback and its leading-space strip, which applies to the
 * window's start alike whatever follows), given `decode` without the clean-up of tokenization
 * spaces (which rewrites text across tokens: TextCodec applies it to the whole text after). A
 * character split across byte tokens decodes as U+FFFD until its last byte arrives, so a window
 * ending in U+FFFD stays open until the next token settles it.
 */
export class IncrementalText {
  private readonly ids: number[] = [];
  /** The window: tokens from here on are decoded for each new token. */
  private windowStart = 0;
  /** Characters of the window's decode that are in `settled`. */
  private windowDone = 0;
  private settled = "";
  /** The window's decode after `windowDone`: text the next token may still change. */
  private open = "";

  constructor(
    private readonly decode: (ids: readonly number[]) => string,
    /**
     * Tokens the decode leaves out (special tokens): they are left out of the windows too, so a
     * run of them cannot leave a window without text to start from.
     */
    private readonly skipped: (id: number) => boolean = () => false,
    /** Tokens of context a window keeps before the new ones. */
    private readonly context = 4,
  ) {}

  /** Add a token; returns the text of every token so far. */
  push(id: number): string {
    if (this.skipped(id)) return this.text;
    this.ids.push(id);
    const decoded = this.decode(this.ids.slice(this.windowStart));
    let end = decoded.length;
    while (end > this.windowDone && decoded[end - 1] === "\ufffd") end--;
    this.settle(decoded, end);
    const size = this.ids.length - this.windowStart;
    // Nothing open: start a shorter window, `context` tokens back, all of whose text is settled —
    // unless those tokens decode to nothing: then the new tokens would be the window's first
    // text, and decoders treat a text's start differently (a leading space stripped).
    if (this.open === "" && size > 2 * this.context) {
      const start = this.ids.length - this.context;
      const settledText = this.decode(this.ids.slice(start));
      if (settledText !== "") {
        this.windowStart = start;
        this.windowDone = settledText.length;
      }
    }
    if (this.ids.length - this.windowStart > maxWindow) this.split(decoded);
    return this.text;
  }

  /** Move the window's text up to `end` into `settled`; the rest is open. */
  private settle(decoded: string, end: number): void {
    if (end > this.windowDone) {
      this.settled += decoded.slice(this.windowDone, end);
      this.windowDone = end;
    }
    this.open = decoded.slice(this.windowDone);
  }

  /**
   * A window past `maxWindow` tokens — its text has kept ending in U+FFFD that long: literal
   * U+FFFD characters, characters that every token boundary cuts (byte-level tokens that span
   * characters), bytes that form none — or holding tokens that decode to nothing. It restarts at
   * one of its last few token boundaries, the last that either
   * - reproduces the window's text from its last settled character on (the new window's own
   *   start — a cut character's stray bytes, a stripped leading space — is settled text it need
   *   not reproduce, as when a window restarts with context), or
   * - splits it cleanly: the two parts decoded apart give the same text.
   * Everything before the new window's start is settled, so no window grows without bound.
   */
  private split(decoded: string): void {
    const length = this.ids.length;
    // The window's last settled character that is not U+FFFD and the text after it, which a new
    // window must reproduce (none when the window's text is all U+FFFD).
    const anchor = lastCharacterStart(decoded, this.windowDone);
    const kept = anchor < 0 ? undefined : decoded.slice(anchor);
    for (let k = length - 1; k > this.windowStart && k >= length - splitSearch; k--) {
      const tail = this.decode(this.ids.slice(k));
      if (tail === "") continue;
      const reproduces = kept !== undefined && tail.endsWith(kept);
      const clean = !reproduces && decoded.endsWith(tail) && this.decode(this.ids.slice(this.windowStart, k)) === decoded.slice(0, decoded.length - tail.length);
      if (!reproduces && !clean) continue;
      // Settled: all of the old window's text but what the tail decodes to from the open text
      // on (for a clean split, the head's text is settled whole).
      const open = decoded.length - this.windowDone;
      const settledUpTo = clean ? Math.max(this.windowDone, decoded.length - tail.length) : this.windowDone;
      this.settle(decoded, settledUpTo);
      this.windowStart = k;
      this.windowDone = clean ? settledUpTo - (decoded.length - tail.length) : tail.length - open;
      return;
    }
    // No such boundary (only bytes that never form a character, or tokens that decode to
    // nothing): settle everything and start an empty window. Only here can the text differ from
    // a full decode: a character begun in the last of those bytes shows as U+FFFD, or a
    // leading-space-stripping decoder drops a space after them.
    this.settle(decoded, decoded.length);
    this.windowStart = length;
    this.windowDone = 0;
    this.open = "";
  }

  /** Characters at the start of the text that no later token changes. */
  get settledLength(): number {
    return this.settled.length;
  }

  /** The text of every token so far. */
  get text(): string {
    return this.settled + this.open;
  }
}

/** Where the last character of text[0, end) that is not U+FFFD starts, or -1. */
function lastCharacterStart(text: string, end: number): number {
  let i = end;
  while (i > 0 && text[i - 1] === "\ufffd") i--;
  if (i === 0) return -1;
  const code = text.charCodeAt(i - 1);
  return code >= 0xdc00 && code <= 0xdfff && i >= 2 ? i - 2 : i - 1;
}

/** Tokens after which a window is split (see split). */
const maxWindow = 32;
/** Token boundaries split() tries, from the last one back. */
const splitSearch = 8;
