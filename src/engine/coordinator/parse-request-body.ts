/**
 * A request body's bytes to a typed request: JSON, then the OpenAI fields (requests.ts). Used in
 * place for small bodies and on the request parser's thread for large ones (request-parser.ts).
 */
import { ApiError, type ChatRequest, type CompletionRequest, parseChatRequest, parseCompletionRequest } from "./requests.js";

export type RequestKind = "chat" | "completion";

/** A body for the parser's thread: `body` is transferred, not copied. */
export interface ParseJob {
  id: number;
  kind: RequestKind;
  body: ArrayBuffer;
}

export type ParseAnswer =
  | { id: number; request: ChatRequest | CompletionRequest }
  | { id: number; error: { status: number; message: string; param: string | null; code: string | null; type: string } };

/** Parse and validate `body` as a request of `kind`; throws the ApiError the client is to get. */
export function parseRequestBody(body: Buffer, kind: RequestKind): ChatRequest | CompletionRequest {
  let raw: unknown;
  try {
    raw = JSON.parse(body.toString("utf8"));
  } catch (error) {
    throw new ApiError(400, `Request body is not valid JSON: ${(error as Error).message}`, null, "invalid_json");
  }
  return kind === "chat" ? parseChatRequest(raw) : parseCompletionRequest(raw);
}
