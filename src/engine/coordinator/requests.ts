/**
 * Validation of OpenAI request bodies: starts from unknown, returns typed requests or throws an
 * ApiError carrying the HTTP status and the OpenAI error fields.
 */
import type { ChatMessage } from "./text.js";

export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly param: string | null = null,
    readonly code: string | null = null,
    readonly type = "invalid_request_error",
    /** Headers the answer carries (Retry-After on a 503). */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
  }

  body(): object {
    return { error: { message: this.message, type: this.type, param: this.param, code: this.code } };
  }
}

export interface CommonRequest {
  model: string | undefined;
  /** Default 256 tokens (bounded by the context). */
  maxTokens: number | undefined;
  /** Default 1. */
  temperature: number;
  /** Default 1. */
  topP: number;
  seed: number | undefined;
  stop: string[];
  stream: boolean;
  includeUsage: boolean;
}

export interface ChatRequest extends CommonRequest {
  kind: "chat";
  messages: ChatMessage[];
  logprobs: boolean;
  topLogprobs: number;
}

export interface CompletionRequest extends CommonRequest {
  kind: "completion";
  prompt: string | number[];
  /** undefined = no log probabilities; else 0..5 alternatives. */
  logprobs: number | undefined;
}

const bad = (message: string, param: string | null): ApiError => new ApiError(400, message, param, "invalid_value");

function optionalNumber(body: Record<string, unknown>, key: string, min: number, max: number, integer: boolean): number | undefined {
  const v = body[key];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== "number" || !Number.isFinite(v) || (integer && !Number.isInteger(v)) || v < min || v > max) {
    throw bad(`Expected \`${key}\` to be ${integer ? "an integer" : "a number"} between ${min} and ${max}, got ${showValue(v)}`, key);
  }
  return v;
}

/** Characters of a string value quoted back in an error message; longer ones are cut. */
const shownChars = 80;

/**
 * A request value, briefly, for an error message: the reply must not echo a 4 MiB string back, and
 * an array or object is named by its kind only, as it may be nested deeper than JSON.stringify can
 * recurse (the stack overflow would answer a 500 instead of a 400 naming the field).
 */
function showValue(v: unknown): string {
  // String(): JSON.stringify would show a number past f64's range (1e999, read as Infinity) as null.
  if (typeof v === "number") return String(v);
  if (typeof v === "string") return v.length > shownChars ? `${JSON.stringify(v.slice(0, shownChars))}… (${v.length} characters)` : JSON.stringify(v);
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (v !== null && typeof v === "object") return "an object";
  return JSON.stringify(v);
}

/** Longest stop sequence accepted, characters. */
export const maxStopChars = 1024;

function parseCommon(body: Record<string, unknown>, maxTokensKeys: string[]): CommonRequest {
  if (body.model !== undefined && typeof body.model !== "string") throw bad("Expected `model` to be a string", "model");
  if (body.n !== undefined && body.n !== null && body.n !== 1) throw bad("Only `n` = 1 is supported", "n");
  let maxTokens: number | undefined;
  for (const key of maxTokensKeys) maxTokens ??= optionalNumber(body, key, 1, Number.MAX_SAFE_INTEGER, true);
  let stop: string[] = [];
  if (typeof body.stop === "string") stop = [body.stop];
  else if (Array.isArray(body.stop)) {
    if (body.stop.length > 4 || !body.stop.every((s) => typeof s === "string")) throw bad("Expected `stop` to be a string or an array of up to 4 strings", "stop");
    stop = body.stop as string[];
  } else if (body.stop !== undefined && body.stop !== null) throw bad("Expected `stop` to be a string or an array of strings", "stop");
  stop = stop.filter((s) => s.length > 0);
  // Each token looks for the stops in the text's end: their length bounds that work.
  const long = stop.find((s) => s.length > maxStopChars);
  if (long !== undefined) throw bad(`A stop sequence may be at most ${maxStopChars} characters; one has ${long.length}`, "stop");
  if (body.stream !== undefined && body.stream !== null && typeof body.stream !== "boolean") throw bad("Expected `stream` to be a boolean", "stream");
  if (body.stream_options !== undefined && body.stream_options !== null && (typeof body.stream_options !== "object" || Array.isArray(body.stream_options))) {
    throw bad("Expected `stream_options` to be an object", "stream_options");
  }
  refuseUnsupported(body);
  const streamOptions = body.stream_options as { include_usage?: unknown } | undefined | null;
  return {
    model: body.model as string | undefined,
    maxTokens,
    temperature: optionalNumber(body, "temperature", 0, 2, false) ?? 1,
    topP: optionalNumber(body, "top_p", Number.MIN_VALUE, 1, false) ?? 1,
    seed: optionalNumber(body, "seed", -Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER, true),
    stop,
    stream: body.stream === true,
    includeUsage: streamOptions?.include_usage === true,
  };
}

/**
 * Parameters shard-engine does not implement, refused when their value would change the output
 * (a client relying on them must not get a 200 that ignored them); their neutral values — a zero
 * penalty, an empty logit_bias, no tools, a text response format — pass, as clients send them by
 * default.
 */
function refuseUnsupported(body: Record<string, unknown>): void {
  const unsupported = (key: string): ApiError => new ApiError(400, `\`${key}\` is not supported by shard-engine`, key, "unsupported_parameter");
  const set = (v: unknown): boolean => v !== undefined && v !== null;
  if (set(body.logit_bias) && (typeof body.logit_bias !== "object" || Object.keys(body.logit_bias as object).length > 0)) throw unsupported("logit_bias");
  for (const key of ["presence_penalty", "frequency_penalty"]) if (set(body[key]) && body[key] !== 0) throw unsupported(key);
  if (set(body.tools) && (!Array.isArray(body.tools) || body.tools.length > 0)) throw unsupported("tools");
  if (set(body.tool_choice) && body.tool_choice !== "none" && body.tool_choice !== "auto") throw unsupported("tool_choice");
  const format = body.response_format as { type?: unknown } | null | undefined;
  if (set(format) && (typeof format !== "object" || format?.type !== "text")) throw unsupported("response_format");
  if (set(body.best_of) && body.best_of !== 1) throw unsupported("best_of");
  if (set(body.suffix) && body.suffix !== "") throw unsupported("suffix");
}

function asObject(body: unknown): Record<string, unknown> {
  if (body === null || typeof body !== "object" || Array.isArray(body)) throw bad("Expected the request body to be a JSON object", null);
  return body as Record<string, unknown>;
}

/**
 * Longest role a message may name, characters. Chat templates render the role into the prompt, and
 * the checks that keep long prompts off the event loop count content: a role is a word ("system",
 * "user", "assistant", "tool"), never a place for text.
 */
const maxRoleChars = 64;

export function parseChatRequest(raw: unknown): ChatRequest {
  const body = asObject(raw);
  const common = parseCommon(body, ["max_completion_tokens", "max_tokens"]);
  if (!Array.isArray(body.messages) || body.messages.length === 0) throw bad("Expected `messages` to be a non-empty array", "messages");
  const messages = body.messages.map((m: unknown, i: number): ChatMessage => {
    const msg = m as { role?: unknown; content?: unknown } | null;
    if (msg === null || typeof msg !== "object" || typeof msg.role !== "string") throw bad(`Expected messages[${i}].role to be a string`, `messages[${i}].role`);
    if (msg.role.length > maxRoleChars) {
      throw bad(
        `Expected messages[${i}].role to name a role such as "system", "user" or "assistant" (at most ${maxRoleChars} characters); it has ${msg.role.length}`,
        `messages[${i}].role`,
      );
    }
    let content: string;
    if (typeof msg.content === "string") content = msg.content;
    else if (msg.content === null || msg.content === undefined) content = "";
    else if (Array.isArray(msg.content)) {
      content = msg.content
        .map((part: unknown, j: number) => {
          const p = part as { type?: unknown; text?: unknown } | null;
          if (p === null || p.type !== "text" || typeof p.text !== "string")
            throw bad(`Only text parts are supported (messages[${i}].content[${j}])`, `messages[${i}].content`);
          return p.text;
        })
        .join("");
    } else throw bad(`Expected messages[${i}].content to be a string or an array of text parts`, `messages[${i}].content`);
    return { role: msg.role, content };
  });
  const logprobs = body.logprobs === true;
  if (body.logprobs !== undefined && body.logprobs !== null && typeof body.logprobs !== "boolean") throw bad("Expected `logprobs` to be a boolean", "logprobs");
  const topLogprobs = optionalNumber(body, "top_logprobs", 0, 20, true) ?? 0;
  if (topLogprobs > 0 && !logprobs) throw bad("`top_logprobs` requires `logprobs` to be true", "top_logprobs");
  return { kind: "chat", ...common, messages, logprobs, topLogprobs };
}

export function parseCompletionRequest(raw: unknown): CompletionRequest {
  const body = asObject(raw);
  const common = parseCommon(body, ["max_tokens"]);
  let prompt: string | number[];
  const p = body.prompt;
  if (typeof p === "string") prompt = p;
  else if (Array.isArray(p) && p.length === 1 && typeof p[0] === "string") prompt = p[0];
  else if (Array.isArray(p) && p.length > 0 && p.every((t) => typeof t === "number" && Number.isInteger(t) && t >= 0)) prompt = p as number[];
  else throw bad("Expected `prompt` to be a string, a one-element array of strings or an array of token ids", "prompt");
  if (body.echo === true) throw bad("`echo` is not supported", "echo");
  const logprobs = optionalNumber(body, "logprobs", 0, 5, true);
  return { kind: "completion", ...common, prompt, logprobs };
}
