/**
 * What keeps a web page the operator has open in a browser from using a server of ours on their
 * machine. Two ways in, two checks:
 *
 * - DNS rebinding: a page on attacker.example whose name is re-pointed at 127.0.0.1 talks to a
 *   loopback server as its own origin, so it may read the answers. It still names its own host in
 *   the Host header: a server bound to loopback serves loopback names only.
 * - Cross-site requests: a form POST or a `fetch` with a text/plain body needs no CORS preflight, so
 *   a page on any site can make one (it cannot read the answer, but the work is done). Browsers mark
 *   them: an Origin that is not this server's, or Sec-Fetch-Site other than same-origin/none. Clients
 *   that are not browsers (curl, SDKs, other servers) send neither header and are taken.
 *
 * "Origin: null" is what a sandboxed iframe, a data: URL or a file:// page sends: any web page can
 * make one, so it is another origin, not a missing one.
 */
import type { IncomingMessage } from "node:http";
import { isLoopbackAddress } from "../spec/index.js";

export interface GuardOptions {
  /** The server is bound to a loopback address: only loopback Host names are served. */
  loopback: boolean;
  /** What the server is, for the reason ("this dashboard", "this router"). */
  what: string;
}

/** Why `request` is refused (a sentence for the 403), or undefined when it may be served. Requests that change something (any method but GET, HEAD and OPTIONS) must come from no page or from this server's own. */
export function refuseForeignRequest(request: IncomingMessage, options: GuardOptions): string | undefined {
  const host = request.headers.host ?? "";
  if (options.loopback && !isLoopbackAddress(host.includes(":") && !host.endsWith("]") ? host : `${host}:80`)) {
    return `${options.what} listens on loopback and serves loopback names only, not ${JSON.stringify(host)}`;
  }
  const method = request.method ?? "GET";
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return undefined;
  const origin = request.headers.origin;
  if (origin !== undefined && (!URL.canParse(origin) || new URL(origin).host !== host)) {
    return `a request from ${JSON.stringify(origin)} is not from a page of ${options.what}`;
  }
  const site = request.headers["sec-fetch-site"];
  if (site !== undefined && site !== "same-origin" && site !== "none") {
    return `a ${JSON.stringify(site)} request is not from a page of ${options.what}`;
  }
  return undefined;
}
