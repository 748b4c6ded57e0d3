/**
 * The flags that hold mlx-lm's batching to the `max_sequences` the plan sized the KV caches for.
 * mlx-lm decodes up to `--decode-concurrency` requests side by side (default 32) and prefills up
 * to `--prompt-concurrency` prompts at once (default 8); its batch is the larger of the two, so
 * both are capped: decode at `maxSequences`, prefill at the smaller of that and mlx-lm's 8.
 * Requests past the cap wait in mlx-lm's queue.
 */
export function capConcurrency(maxSequences: number): string[] {
  return ["--decode-concurrency", String(maxSequences), "--prompt-concurrency", String(Math.min(maxSequences, 8))];
}
