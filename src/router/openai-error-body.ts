/**
 * A backend's error answer in the OpenAI API's shape. Engines others wrote answer errors their own
 * way: mlx_lm.server sends `{"error": "max_tokens must be at least 1"}`, and a 404 of plain text
 * labelled JSON. Through one router an OpenAI client would then meet two shapes, one of which it
 * cannot parse; the router rewrites such a body as `{"error": {"message", "type", "param", "code"}}`
 * with the backend's words as the message, and passes an answer already in that shape untouched.
 */

/** Largest error body rewritten, bytes: a larger one is passed on as it is. */
export const maxErrorBodyBytes = 64 * 1024;

/** The body to send for a backend's error answer of `status`: undefined when `body` is in OpenAI's shape already. */
export function openAIErrorBody(status: number, body: Buffer, backend: string): string | undefined {
  const text = body.toString("utf8");
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    parsed = undefined;
  }
  const error = (parsed as { error?: unknown } | undefined)?.error;
  if (typeof error === "object" && error !== null && typeof (error as { message?: unknown }).message === "string") return undefined;
  const words =
    typeof error === "string"
      ? error
      : typeof (parsed as { detail?: unknown } | undefined)?.detail === "string"
        ? (parsed as { detail: string }).detail
        : typeof (parsed as { message?: unknown } | undefined)?.message === "string"
          ? (parsed as { message: string }).message
          : text.trim().slice(0, 1000);
  const message = `backend ${backend}: ${words === "" ? `HTTP ${status}` : words}`;
  const type = status === 404 ? "not_found_error" : status < 500 ? "invalid_request_error" : "api_error";
  return JSON.stringify({ error: { message, type, param: null, code: `backend_${status}` } });
}
