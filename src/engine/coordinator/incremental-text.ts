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
    /** Tokens of context a window keeps before the new ones. */
    private readonly context = 4,
  ) {}

  /** Add a token; returns the text of every token so far. */
  push(id: number): string {
    this.ids.push(id);
    const decoded = this.decode(this.ids.slice(this.windowStart));
    let end = decoded.length;
    while (end > this.windowDone && decoded[end - 1] === "\ufffd") end--;
    // A window still open after `maxWindow` tokens holds bytes that form no character (a model
    // emitting invalid UTF-8): they settle as the U+FFFD they are, so that garbage cannot make
    // every token decode a longer window. (A character begun in the last three of them would
    // then show as U+FFFD too.)
    if (this.ids.length - this.windowStart > maxWindow) end = decoded.length;
    if (end > this.windowDone) {
      this.settled += decoded.slice(this.windowDone, end);
      this.windowDone = end;
    }
    this.open = decoded.slice(this.windowDone);
    // Nothing open: start a shorter window, `context` tokens back, all of whose text is settled.
    if (this.open === "" && this.ids.length - this.windowStart > 2 * this.context) {
      this.windowStart = this.ids.length - this.context;
      this.windowDone = this.decode(this.ids.slice(this.windowStart)).length;
    }
    return this.text;
  }

  /** The text of every token so far. */
  get text(): string {
    return this.settled + this.open;
  }
}

/** Tokens after which a window settles what it still holds open (see push). */
const maxWindow = 32;
