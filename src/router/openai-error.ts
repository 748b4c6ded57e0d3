/** Errors in the OpenAI API's shape, so OpenAI clients surface them as API errors with a message. */
import type { ServerResponse } from "node:http";

export type OpenAIErrorType = "invalid_request_error" | "not_found_error" | "api_error" | "server_error";

/** `headers` are extra response headers, e.g. `retry-after` on a 503. */
export function sendOpenAIError(
  res: ServerResponse,
  status: number,
  message: string,
  type: OpenAIErrorType,
  code: string,
  param: string | null = null,
  headers: Record<string, string> = {},
): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  sendJson(res, status, { error: { message, type, param, code } }, headers);
}

export function sendJson(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { ...headers, "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  res.end(text);
}
