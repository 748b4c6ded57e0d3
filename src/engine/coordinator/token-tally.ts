/**
 * The work this coordinator's pipeline has done since it started, as /health says it: tokens
 * sampled, and prompt tokens processed (counted as each chunk of a prompt is done). A generation
 * watchdog whose one-token probe waited behind a long prompt sees the second grow, chunk by chunk,
 * and takes the pipeline for busy, not hung: nothing is sampled meanwhile.
 */
export interface TokenTally {
  /** Tokens sampled by every request. */
  sampled: number;
  /** Prompt tokens processed, as each chunk of a prompt (or the whole of a short one) is done. */
  promptTokens: number;
}
