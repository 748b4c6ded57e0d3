/**
 * The page's two requests besides the event stream: "Reconcile now" and the plan preview. The token
 * is asked of the person when the daemon says one is configured, kept in memory only for this page
 * (never stored), and sent as a bearer header.
 */
import { parseShown } from "./parse-shown.js";
import type { PlanPreviewView } from "./status-types.js";

export type Answer<T> = { ok: true; status: number; body: T } | { ok: false; status: number; reason: string; message: string };

/**
 * What a bearer header can carry: one word of visible ASCII. fetch throws on a character past
 * Latin-1 (a pasted curly quote), which left "Reconcile now" saying "Asking…" for ever, and the
 * daemon reads the header's token as one word.
 */
const sendableToken = /^[\x21-\x7e]+$/;

/** The reason of an answer the page gives itself for a token it cannot send; main.tsx asks again with its message. */
export const tokenNotSendable = "TokenNotSendable";

async function send<T>(path: string, init: RequestInit, token: string | undefined): Promise<Answer<T>> {
  if (token !== undefined && !sendableToken.test(token)) {
    return {
      ok: false,
      status: 401,
      reason: tokenNotSendable,
      message: "a dashboard token is one word of visible ASCII characters, without spaces, accents or curly quotes: check what was pasted",
    };
  }
  const headers = new Headers(init.headers);
  if (token !== undefined) headers.set("authorization", `Bearer ${token}`);
  let response: Response;
  try {
    response = await fetch(path, { ...init, headers });
  } catch {
    return { ok: false, status: 0, reason: "DaemonUnreachable", message: "the daemon does not answer" };
  }
  type Body = T & { error?: { reason: string; message: string } };
  const body = await response
    .text()
    .then((text) => parseShown<Body>(text))
    .catch(() => undefined);
  if (response.ok || (response.status === 422 && body !== undefined && body.error === undefined)) return { ok: true, status: response.status, body: body as T };
  return { ok: false, status: response.status, reason: body?.error?.reason ?? `HTTP${response.status}`, message: body?.error?.message ?? response.statusText };
}

/** `POST /api/clusters/<name>/reconcile`: resolves once the daemon took the request. */
export function requestReconcile(cluster: string, token: string | undefined): Promise<Answer<{ cluster: string; taken: boolean }>> {
  return send(`api/clusters/${encodeURIComponent(cluster)}/reconcile`, { method: "POST" }, token);
}

/** `POST /api/plan?name=<name>[&probe=true]` with the definition's TOML. */
export function previewPlan(toml: string, name: string, probe: boolean, token: string | undefined): Promise<Answer<PlanPreviewView>> {
  const query = new URLSearchParams({ name, ...(probe ? { probe: "true" } : {}) });
  return send(`api/plan?${query.toString()}`, { method: "POST", headers: { "content-type": "application/toml" }, body: toml }, token);
}
