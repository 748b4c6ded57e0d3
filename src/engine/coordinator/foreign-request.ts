/**
 * What keeps a web page open in a browser on the coordinator's machine (or on any machine that can
 * reach it) from using it. shard-engine is a program of its own, so it carries its own copy of the
 * rule shardctl's router and dashboard apply:
 *
 * - DNS rebinding: a page on attacker.example whose name is re-pointed at 127.0.0.1 talks to a
 *   loopback server as its own origin and may read the answers; it still names its own host in the
 *   Host header, so a coordinator bound to loopback serves loopback names only.
 * - Cross-site requests: a form POST or a `fetch` with a text/plain body needs no CORS preflight, so
 *   any site can make one (it cannot read the answer, but the completion is computed). Browsers mark
 *   them with an Origin that is not this server's, or Sec-Fetch-Site other than same-origin/none.
 *   Clients that are not browsers (curl, SDKs, the router) send neither and are served.
 */
import type { IncomingMessage } from "node:http";

/** Whether `host` (a name or address, no port) is loopback: 127.0.0.0/8, ::1 or localhost. */
export function isLoopbackHost(host: string): boolean {
  const name = host.toLowerCase().replace(/^\[(.*)\]$/, "$1");
  if (name === "localhost" || name === "::1") return true;
  const octets = name.split(".");
  return octets.length === 4 && octets[0] === "127" && octets.every((o) => /^[0-9]{1,3}$/.test(o) && Number(o) <= 255);
}

/** The host of a Host header ("name:port", "[v6]:port", "name"), without its port. */
function hostName(header: string): string {
  if (header.startsWith("[")) return header.slice(0, header.indexOf("]") + 1);
  const colon = header.lastIndexOf(":");
  return colon < 0 ? header : header.slice(0, colon);
}

/** Why `request` is refused (a sentence for the 403), or undefined when it may be served. */
export function refuseForeignRequest(request: IncomingMessage, boundToLoopback: boolean): string | undefined {
  const host = request.headers.host ?? "";
  if (boundToLoopback && !isLoopbackHost(hostName(host))) {
    return `this server listens on loopback and serves loopback names only, not ${JSON.stringify(host)}`;
  }
  const method = request.method ?? "GET";
  if (method === "GET" || method === "HEAD" || method === "OPTIONS") return undefined;
  const origin = request.headers.origin;
  if (origin !== undefined && (!URL.canParse(origin) || new URL(origin).host !== host)) {
    return `a request from a web page of ${JSON.stringify(origin)} is not served: browsers' cross-site requests are refused`;
  }
  const site = request.headers["sec-fetch-site"];
  if (site !== undefined && site !== "same-origin" && site !== "none") {
    return `a ${JSON.stringify(site)} request from a web page is not served: browsers' cross-site requests are refused`;
  }
  return undefined;
}
