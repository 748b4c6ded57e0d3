/**
 * The autoregressive loop of one request: the prompt (in chunks, when long), then one token at a time until EOS,
 * a stop string, max_tokens or the context limit. Text is released in deltas that never change
 * once sent: never a partial stop string, a partial UTF-8 character, or a space the tokenizer's
 * clean-up may still remove.
 */
import type { SampledToken, SamplingParams } from "../model/index.js";
import type { Pipeline } from "./pipeline.js";
import type { TextCodec } from "./text.js";
import type { TokenTally } from "./token-tally.js";

export interface GenerateOptions {
  promptIds: number[];
  maxTokens: number;
  params: SamplingParams;
  stop: string[];
  eosIds: ReadonlySet<number>;
  /** Counts each sampled token and each prompt token processed, when given. */
  tally?: TokenTally;
}

export interface TokenInfo {
  sampled: SampledToken;
  /** Offset of the token's text in the completion, characters. */
  offset: number;
}

export interface GenerateResult {
  text: string;
  finishReason: "stop" | "length";
  completionTokens: number;
}

/**
 * Tokens of a prompt's chunk (see startPrompt in generate), 512. A prompt up to this long goes in
 * one step; each chunk costs the pipeline a round trip more, and holds others back for its time.
 */
export const promptChunkTokens = 512;

let nextSeq = 1;

/** Allocate a sequence id unique in this process (u32, wraps). */
export function allocateSeq(): number {
  const seq = nextSeq;
  nextSeq = nextSeq >= 0xfffffffe ? 1 : nextSeq + 1;
  return seq;
}

export async function generate(
  pipeline: Pipeline,
  codec: TextCodec,
  o: GenerateOptions,
  /** Receives text as it is settled; a promise it returns (the client is not reading) is awaited before the next token is taken. */
  onDelta: (text: string, tokens: TokenInfo[]) => void | Promise<void>,
  cancelled: () => boolean,
): Promise<GenerateResult> {
  const seq = allocateSeq();
  pipeline.prepare(seq, o.params);
  const completion = codec.completionText();
  let tokens = 0;
  let pending: TokenInfo[] = [];
  let emitted = 0;
  let text = "";
  let finishReason: "stop" | "length" = "length";
  const longestStop = o.stop.reduce((m, s) => Math.max(m, s.length), 0);
  // The next token's run starts before the last token's text goes to the client: on a pipeline
  // the stages compute while the client is written to (a socket write that wakes an idle reader
  // costs a few hundred µs on a virtual machine). A run left in flight when the loop ends early is
  // released in `finally`; its rejection is expected and not an error.
  const startRun = (input: readonly number[]): Promise<SampledToken> => {
    const run = pipeline.run(seq, input);
    run.catch(() => undefined);
    return run;
  };
  // A long prompt goes in chunks: every chunk but the last only fills the caches, and the steps of
  // other sequences run between them, so one long prompt holds their tokens back for a chunk's
  // time, not for the whole prompt's. A sequence cancelled meanwhile stops at the next chunk.
  const startPrompt = (ids: readonly number[]): Promise<SampledToken> => {
    const last = Math.max(0, Math.ceil(ids.length / promptChunkTokens) - 1) * promptChunkTokens;
    const run = (async () => {
      for (let start = 0; start < last; start += promptChunkTokens) {
        const chunk = ids.slice(start, start + promptChunkTokens);
        await pipeline.fill(seq, chunk);
        if (o.tally !== undefined) o.tally.promptTokens += chunk.length;
        if (cancelled()) throw new Error("client disconnected");
      }
      const sampled = await pipeline.run(seq, ids.slice(last));
      if (o.tally !== undefined) o.tally.promptTokens += ids.length - last;
      return sampled;
    })();
    run.catch(() => undefined);
    return run;
  };
  try {
    let next = o.maxTokens > 0 ? startPrompt(o.promptIds) : undefined;
    while (next !== undefined) {
      const sampled = await next;
      next = undefined;
      if (o.tally !== undefined) o.tally.sampled++;
      if (cancelled()) throw new Error("client disconnected");
      if (o.eosIds.has(sampled.token)) {
        finishReason = "stop";
        break;
      }
      tokens++;
      pending.push({ sampled, offset: text.length });
      const now = completion.push(sampled.token);
      text = now.text;
      const stopAt = findStop(text, o.stop, Math.max(0, emitted - longestStop));
      if (stopAt >= 0) {
        text = text.slice(0, stopAt);
        finishReason = "stop";
        break;
      }
      if (tokens < o.maxTokens) next = startRun([sampled.token]);
      const safe = sendableLength(text, now.settled, o.stop);
      if (safe > emitted) {
        const delta = text.slice(emitted, safe);
        const infos = pending;
        pending = [];
        emitted = safe;
        // The next token's run computes meanwhile: one run in flight at most.
        await onDelta(delta, infos);
      }
    }
    if (text.length > emitted || pending.length > 0) await onDelta(text.slice(emitted), pending);
    return { text, finishReason, completionTokens: tokens };
  } finally {
    pipeline.release(seq);
  }
}

/**
 * How much of `text` a stream can send: its first `settled` characters (what no later token can
 * change, see CompletionText), less any end of them that could begin a stop string.
 * Sent text then never changes and never holds a stop string.
 */
export function sendableLength(text: string, settled: number, stops: string[]): number {
  return settled - holdBack(text.slice(0, settled), stops);
}

/** Where the first of `stops` begins in `text` at or after `from`, or -1. */
export function findStop(text: string, stops: string[], from: number): number {
  let best = -1;
  for (const s of stops) {
    const at = text.indexOf(s, from);
    if (at >= 0 && (best < 0 || at < best)) best = at;
  }
  return best;
}

/** Characters at the end that could still become a stop string. */
function holdBack(text: string, stops: string[]): number {
  let hold = 0;
  for (const s of stops) hold = Math.max(hold, prefixAtEnd(text, s));
  return hold;
}

/**
 * The longest proper prefix of `stop` that `text` ends with, characters: Knuth–Morris–Pratt over
 * the last stop.length − 1 characters of the text, so each token costs O(stop length), not the
 * square of it (a text of one repeated character against a stop of that character and another
 * would otherwise compare every length at every token).
 */
function prefixAtEnd(text: string, stop: string): number {
  const fail = new Int32Array(stop.length);
  for (let i = 1, k = 0; i < stop.length; i++) {
    while (k > 0 && stop[i] !== stop[k]) k = fail[k - 1] as number;
    if (stop[i] === stop[k]) k++;
    fail[i] = k;
  }
  let matched = 0;
  for (let i = Math.max(0, text.length - stop.length + 1); i < text.length; i++) {
    while (matched > 0 && text[i] !== stop[matched]) matched = fail[matched - 1] as number;
    if (text[i] === stop[matched]) matched++;
    // A whole match is a stop found, not held back (findStop ends the completion at it first).
    if (matched === stop.length) matched = fail[matched - 1] as number;
  }
  return matched;
}
