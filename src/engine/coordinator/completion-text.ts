/**
 * A completion's text as decode() gives it — the clean-up of tokenization spaces applied when the
 * tokenizer asks for it — token by token, and how much of it is settled (no later token can change
 * it), at a cost per token that does not grow with the completion.
 *
 * IncrementalText gives the raw text (before the clean-up) a window at a time. The clean-up
 * rewrites across tokens, but never across a cut where the raw text before it does not end with
 * the beginning of one of its patterns (see TextCodec.cleanCut): there the clean-up of the whole is
 * that of the two parts joined. So the clean-up of the raw text IncrementalText has settled is
 * kept, up to the last such cut, and each token cleans only what lies after it: the open window
 * and the few characters held at a cut. Cleaning the whole text again each token cost time in
 * proportion to its length (about 150 µs a token at 16 000 characters here).
 */
import type { IncrementalText } from "./incremental-text.js";

/** How the clean-up is applied: TextCodec's. */
export interface CleanUpRules {
  cleanUp(raw: string): string;
  /** The last place at or before `end` where the clean-up may cut `raw` (see TextCodec.cleanCut). */
  cleanCut(raw: string, end: number): number;
}

export interface CompletionTextState {
  /** decode() of every token so far. */
  text: string;
  /** Characters of `text` that no later token can change: what a stream can send. */
  settled: number;
}

export class CompletionText {
  /** Characters of the raw text whose clean-up is `cleaned`: a cut within the settled raw text. */
  private cleanedRaw = 0;
  private cleaned = "";

  constructor(
    private readonly raw: IncrementalText,
    private readonly rules: CleanUpRules,
  ) {}

  /** Add a token; returns the text so far and how much of it is settled. */
  push(id: number): CompletionTextState {
    const raw = this.raw.push(id);
    // The raw text IncrementalText has settled never changes: a cut in it is final.
    const cut = this.rules.cleanCut(raw, this.raw.settledLength);
    if (cut > this.cleanedRaw) {
      this.cleaned += this.rules.cleanUp(raw.slice(this.cleanedRaw, cut));
      this.cleanedRaw = cut;
    }
    const text = this.cleaned + this.rules.cleanUp(raw.slice(this.cleanedRaw));
    // Settled: all but a trailing U+FFFD (the first bytes of a character still to come) and what
    // follows the last cut before it (a space a later token may join to a pattern).
    const end = raw.endsWith("\ufffd") ? raw.length - 1 : raw.length;
    const settledCut = this.rules.cleanCut(raw, end);
    // (The cleaned part is final even when it ends in U+FFFD: IncrementalText settles such bytes
    // only once it has given up on them forming a character.)
    const settled = text.length - this.rules.cleanUp(raw.slice(Math.max(settledCut, this.cleanedRaw))).length;
    return { text, settled };
  }
}
