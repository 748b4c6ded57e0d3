/**
 * What the coordinator's /health says of the work in hand: the tokens sampled since it started,
 * and whether it is processing a prompt within the time that prompt should take.
 *
 * A long prompt holds every other request back while the stages process it (a generation
 * watchdog's one-token probe included), and nothing is sampled meanwhile: without a word a watchdog
 * would take that for a hung pipeline. The stages vouch that a computation moves (a stage stuck in
 * one stops its heartbeats, and its links die); what /health adds is that a prompt is in hand and
 * not overdue: due 2 s after it began (or after the prompt before it ended) plus 4 × its tokens at
 * the rate this process has processed prompts so far. A prompt overdue is said no longer: a request
 * lost in the pipeline is then no prompt in hand.
 */

/** Slack before any prompt is overdue, ms. */
const dueSlackMs = 2_000;
/** How many times its expected time a prompt may take before it is overdue. */
const dueFactor = 4;
/** Prompt tokens processed per ms assumed before a prompt measured it (50 per second: far slower than any engine). */
const assumedTokensPerMs = 0.05;
/** Prompts shorter than this do not measure the rate: their time is mostly the pipeline's round trip. */
const measuredPromptTokens = 16;

export class TokenTally {
  /** Tokens sampled by every request of this process since it started. */
  sampled = 0;
  /** Prompts in hand by sequence: their tokens, and when each was started (performance.now(), ms). */
  private readonly prompts = new Map<number, { tokens: number; at: number }>();
  /** When the last prompt ended (performance.now(), ms). */
  private lastEndedAt = 0;
  /** Prompt tokens processed per ms, a moving average of the prompts measured so far. */
  private tokensPerMs: number | undefined;

  /** A prompt of `tokens` tokens goes into the pipeline for sequence `seq`. */
  promptStarted(seq: number, tokens: number): void {
    this.prompts.set(seq, { tokens, at: performance.now() });
  }

  /** The prompt of `seq` ended (its first token came, or it failed). */
  promptEnded(seq: number, processed: boolean): void {
    const prompt = this.prompts.get(seq);
    if (prompt === undefined) return;
    this.prompts.delete(seq);
    const now = performance.now();
    const ms = now - Math.max(prompt.at, this.lastEndedAt);
    this.lastEndedAt = now;
    if (!processed || prompt.tokens < measuredPromptTokens || ms <= 0) return;
    const rate = prompt.tokens / ms;
    this.tokensPerMs = this.tokensPerMs === undefined ? rate : 0.7 * this.tokensPerMs + 0.3 * rate;
  }

  /** Whether a prompt is in hand and not overdue (see above). */
  busyWithPrompt(): boolean {
    let oldest: { tokens: number; at: number } | undefined;
    for (const prompt of this.prompts.values()) if (oldest === undefined || prompt.at < oldest.at) oldest = prompt;
    if (oldest === undefined) return false;
    const began = Math.max(oldest.at, this.lastEndedAt);
    const due = began + dueSlackMs + (dueFactor * oldest.tokens) / (this.tokensPerMs ?? assumedTokensPerMs);
    return performance.now() < due;
  }
}
