/** Small helpers every endpoint answers with: JSON bodies, the one error shape, bounded request bodies. */
import type { IncomingMessage, ServerResponse } from "node:http";
import { ShardctlError, type DashboardReason, type Reason } from "../errors/index.js";

/** Headers on every answer: no sniffing, no framing, only this origin's scripts and styles. */
export const securityHeaders = {
  "x-content-type-options": "nosniff",
  "x-frame-options": "DENY",
  "referrer-policy": "no-referrer",
  "content-security-policy":
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
} as const;

export function replyJson(response: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  response.writeHead(status, { "content-type": "application/json; charset=utf-8", "cache-control": "no-store", "content-length": Buffer.byteLength(text), ...headers });
  response.end(text);
}

/** The one error body: `{ "error": { "reason": "...", "message": "..." } }`. */
export function replyError(response: ServerResponse, status: number, reason: Reason, message: string, headers: Record<string, string> = {}): void {
  replyJson(response, status, { error: { reason, message } }, headers);
}

/** The request body as text, refused past `limitBytes`. */
export async function readBody(request: IncomingMessage, limitBytes: number): Promise<string> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > limitBytes) throw badRequest("DashboardBadRequest", `the body is larger than ${limitBytes} bytes`);
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

function badRequest(reason: DashboardReason, message: string): ShardctlError {
  return new ShardctlError(reason, message, { terminal: true });
}
