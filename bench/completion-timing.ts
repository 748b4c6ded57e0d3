/**
 * Decode speed of any OpenAI-compatible server from two non-streamed greedy completions of the same
 * prompt made back to back: one of 1 token (the time to first token: HTTP, prompt processing, one
 * forward pass) and one of `tokens` tokens. Decode tokens/s = (tokens − 1) ÷ (long − short), so
 * prompt processing and request overhead cancel out. Non-streamed on purpose: mlx-lm's stream may
 * merge or hold back tokens that decode to partial UTF-8, so counting stream events would not count
 * tokens; the usage block of a non-streamed answer does.
 */

export interface CompletionTiming {
  /** Tokens the server says it generated. */
  tokens: number;
  ms: number;
  /** The generated text (to compare engines' greedy outputs). */
  text: string;
}

/** One non-streamed completion at temperature 0; tokens from `usage.completion_tokens`. */
export async function timeCompletion(url: string, prompt: string, maxTokens: number): Promise<CompletionTiming> {
  const start = performance.now();
  const r = await fetch(`${url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt, max_tokens: maxTokens, temperature: 0 }),
    signal: AbortSignal.timeout(120_000),
  });
  const body = (await r.json()) as { usage?: { completion_tokens: number }; choices?: Array<{ text?: string }>; error?: unknown };
  const ms = performance.now() - start;
  if (r.status !== 200 || body.usage === undefined) throw new Error(`completion on ${url} failed: ${r.status} ${JSON.stringify(body)}`);
  return { tokens: body.usage.completion_tokens, ms, text: body.choices?.[0]?.text ?? "" };
}

export interface DecodeSample {
  /** Time to first token, ms (a 1-token completion). */
  ttftMs: number;
  /** Tokens the long completion generated (below `tokens` when the model chose end-of-sequence). */
  tokens: number;
  decodeTokensPerSecond: number;
  /** The long completion's text. */
  text: string;
}

/** One round: the 1-token completion, then the `tokens`-token one. */
export async function sampleDecode(url: string, prompt: string, tokens: number): Promise<DecodeSample> {
  const first = await timeCompletion(url, prompt, 1);
  const long = await timeCompletion(url, prompt, tokens);
  if (long.tokens < 8) throw new Error(`${url} generated only ${long.tokens} tokens for ${JSON.stringify(prompt)}: too few to time decoding`);
  return { ttftMs: first.ms, tokens: long.tokens, decodeTokensPerSecond: (long.tokens - 1) / ((long.ms - first.ms) / 1000), text: long.text };
}

/** Median of a non-empty list. */
export function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(s.length / 2);
  return s.length % 2 === 1 ? s[mid]! : (s[mid - 1]! + s[mid]!) / 2;
}

export const round = (x: number, digits = 3): number => Math.round(x * 10 ** digits) / 10 ** digits;
