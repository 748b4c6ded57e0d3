/**
 * Forwards one buffered request to one backend and streams the answer back unbuffered: each chunk
 * the backend writes (an SSE event, say) is written to the client as it arrives. A client that goes
 * away aborts the upstream request, so the backend stops generating.
 */
import { request as httpRequest, type Agent, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from "node:http";
import { request as httpsRequest } from "node:https";
import { maxErrorBodyBytes, openAIErrorBody } from "./openai-error-body.js";
import type { BackendEntry } from "./types.js";

/**
 * How a forward ended: `connect` failures never reached the backend and are safe to retry elsewhere;
 * `silent`: the backend sent nothing (not even its head) for the idle deadline.
 */
export type ProxyOutcome =
  { kind: "done"; status: number } | { kind: "connect-failed"; error: Error } | { kind: "failed"; error: Error } | { kind: "silent"; error: Error };

export type ProxyContext = {
  agents: { http: Agent; https: Agent };
  /** Deadline for the TCP connection to the backend, milliseconds. */
  connectTimeoutMs: number;
  /**
   * Longest the backend may send nothing while the router waits for it (its head, or the next bytes
   * of its body), milliseconds: a hung backend is answered 504, or its stream ended with an error
   * event. Not counted while the client is the one not reading.
   */
  idleTimeoutMs: number;
  /** Longest a client may read nothing of an answer the backend has more of, milliseconds; then both are let go. */
  clientStallMs: number;
};

// Hop-by-hop headers (RFC 9110 §7.6.1) are the connection's, not the message's; so is every
// header the Connection header names (a client's or backend's own per-connection fields).
const HOP_BY_HOP = new Set(["connection", "keep-alive", "proxy-connection", "transfer-encoding", "te", "trailer", "upgrade", "host", "content-length"]);

// A browser's marks of where a request came from (Origin, Sec-Fetch-*) describe the router's
// origin, which the router has judged (browser-guard): to a backend, whose origin is another, they
// would make a page of the router's own look like a foreign page, and a backend that refuses
// those (shard-engine does) would refuse it.
const BROWSER_MARKS = new Set(["origin", "sec-fetch-site", "sec-fetch-mode", "sec-fetch-dest", "sec-fetch-user"]);

const CONNECT_ERRORS = new Set(["ECONNREFUSED", "EHOSTUNREACH", "ENETUNREACH", "EADDRNOTAVAIL", "ENOTFOUND", "ConnectTimeout"]);

/**
 * Forwards `req` to `backend` at `path` (the normalised request path and query, normalise-path.ts:
 * never `req.url` as received, whose dot segments would resolve above the backend's prefix).
 */
export function proxyRequest(context: ProxyContext, backend: BackendEntry, req: IncomingMessage, path: string, body: Buffer, res: ServerResponse): Promise<ProxyOutcome> {
  return new Promise((resolve) => {
    let target: URL;
    try {
      target = joinUrl(backend.url, path);
    } catch (error) {
      resolve({ kind: "failed", error: error as Error });
      return;
    }
    const headers = copyHeaders(req.headers);
    for (const mark of BROWSER_MARKS) delete headers[mark];
    headers["content-length"] = String(body.length);
    const forwardedFor = req.socket.remoteAddress;
    if (forwardedFor !== undefined) headers["x-forwarded-for"] = forwardedFor;
    const secure = target.protocol === "https:";
    const upstream = (secure ? httpsRequest : httpRequest)(target, {
      method: req.method,
      headers,
      agent: secure ? context.agents.https : context.agents.http,
    });
    let settled = false;
    // The idle deadline (armed while the router waits for the backend) and the client's (armed
    // while a client that reads nothing holds the answer back).
    let idle: NodeJS.Timeout | undefined;
    let stall: NodeJS.Timeout | undefined;
    let eventStream = false;
    // Whether the backend's answer has begun (its head came): what fails after that failed an
    // answer, whether or not its head was passed on yet (an error answer is read whole first).
    let answered = false;
    // The last bytes passed on to the client: whether they ended an event, or the stream.
    const tail = new StreamTail();
    const settle = (outcome: ProxyOutcome): void => {
      clearTimeout(idle);
      clearTimeout(stall);
      if (settled) return;
      settled = true;
      resolve(outcome);
    };
    const waitForBackend = (): void => {
      clearTimeout(idle);
      idle = setTimeout(() => {
        const error = new Error(`the backend sent nothing for ${Math.round(context.idleTimeoutMs / 1000)} s`);
        settle(answered ? { kind: "failed", error } : { kind: "silent", error });
        upstream.destroy();
        if (res.headersSent) cutMidAnswer(error, "upstream_timeout", "end");
      }, context.idleTimeoutMs);
    };
    // Mid-answer: an event stream's client is told in its own format (OpenAI clients raise an API
    // error with the message), without the stream's `[DONE]`. The router's own timeout then ends
    // the stream; a backend that died has its client's connection cut after the event, so that a
    // client that reads no events still sees the stream fail. Any other body can only be cut.
    const cutMidAnswer = (error: Error, code: string, then: "end" | "cut"): void => {
      if (!eventStream || res.writableEnded || res.destroyed) {
        res.destroy(error);
        return;
      }
      // After a whole event only: the end of one cut short first, or the two would read as one.
      const separator = tail.endsEvent() ? "" : "\n\n";
      const event = { error: { message: `backend ${backend.name}: ${error.message}`, type: "api_error", param: null, code } };
      const text = `${separator}data: ${JSON.stringify(event)}\n\n`;
      if (then === "end") res.end(text);
      else res.write(text, () => res.destroy(error));
    };
    waitForBackend();

    upstream.on("socket", (socket) => {
      if (!socket.connecting) return;
      const timer = setTimeout(() => {
        const error = Object.assign(new Error(`connect timeout after ${context.connectTimeoutMs} ms`), { code: "ConnectTimeout" });
        upstream.destroy(error);
      }, context.connectTimeoutMs);
      socket.once("connect", () => clearTimeout(timer));
      socket.once("close", () => clearTimeout(timer));
    });

    upstream.on("error", (error: NodeJS.ErrnoException) => {
      if (settled) return;
      if (res.headersSent) {
        // Mid-answer failure: the status is gone.
        cutMidAnswer(error, "upstream_failed", "cut");
        settle({ kind: "failed", error });
        return;
      }
      // The backend answered (an error answer being read): it had the request.
      if (answered) return settle({ kind: "failed", error });
      // A reused keep-alive socket the backend closed meanwhile never carried our request either.
      const neverReached = CONNECT_ERRORS.has(error.code ?? "") || (upstream.reusedSocket && error.code === "ECONNRESET");
      settle(neverReached ? { kind: "connect-failed", error } : { kind: "failed", error });
    });

    upstream.on("response", (answer) => {
      answered = true;
      // A status HTTP has no place for (099, 1000) would make writeHead throw inside this listener,
      // where nothing catches it: the process (the daemon, for the embedded router) would end.
      const status = answer.statusCode ?? 0;
      if (!(status >= 200 && status <= 599)) {
        answer.destroy();
        upstream.destroy();
        settle({ kind: "failed", error: new Error(`the backend answered with status ${status}, which HTTP has no place for`) });
        return;
      }
      eventStream = String(answer.headers["content-type"] ?? "")
        .toLowerCase()
        .startsWith("text/event-stream");
      // An error answer of bounded size is read whole and passed on in OpenAI's shape.
      const declared = Number(answer.headers["content-length"] ?? Number.NaN);
      // A compressed one is passed on as it came: its bytes are not the words to rewrite.
      const encoded = String(answer.headers["content-encoding"] ?? "identity").toLowerCase() !== "identity";
      if (status >= 400 && !eventStream && !encoded && !(declared > maxErrorBodyBytes)) return passErrorOn(answer, status);
      res.writeHead(status, copyHeaders(answer.headers));
      // Send the head now: a streaming client should see headers before the first token.
      res.flushHeaders();
      waitForBackend();
      // OpenAI's completions streams end with `data: [DONE]`; other event streams end as they please.
      const mustEndDone = eventStream && /\/completions$/.test(path.split("?")[0]!) && closeDelimited(answer);
      answer.on("data", (chunk: Buffer) => {
        if (settled) return;
        tail.see(chunk);
        // Written at once (no coalescing); only a slow client makes us pause the backend. Paused,
        // the backend's silence is the client's doing; a client that reads nothing for the stall
        // deadline is let go, and so is the backend's work for it (the router's buffers would
        // otherwise hide the slow reader from the backend's own limit).
        if (res.write(chunk)) return waitForBackend();
        clearTimeout(idle);
        answer.pause();
        stall = setTimeout(() => {
          settle({ kind: "failed", error: new Error(`the client read nothing for ${Math.round(context.clientStallMs / 1000)} s`) });
          upstream.destroy();
          res.destroy();
        }, context.clientStallMs);
        res.once("drain", () => {
          clearTimeout(stall);
          if (settled) return;
          waitForBackend();
          answer.resume();
        });
      });
      answer.on("end", () => {
        if (settled) return;
        if (mustEndDone && !tail.endsDone()) {
          // The backend's connection closed before its stream's last event: it died or was cut.
          // Ended cleanly, the client would take what came for a whole (short) answer.
          const error = new Error("the backend's event stream ended without its last event ([DONE]): the backend closed the connection mid-answer");
          cutMidAnswer(error, "upstream_failed", "cut");
          settle({ kind: "failed", error });
          return;
        }
        res.end();
        settle({ kind: "done", status: answer.statusCode ?? 502 });
      });
      answer.on("error", (error) => {
        if (settled) return;
        cutMidAnswer(error, "upstream_failed", "cut");
        settle({ kind: "failed", error });
      });
    });

    // A backend's error answer, read whole (its idle deadline still applies) and sent in OpenAI's
    // shape; one larger than the bound is sent as it came.
    const passErrorOn = (answer: IncomingMessage, status: number): void => {
      const chunks: Buffer[] = [];
      let bytes = 0;
      waitForBackend();
      const onData = (chunk: Buffer): void => {
        if (settled) return;
        waitForBackend();
        bytes += chunk.length;
        chunks.push(chunk);
        if (bytes <= maxErrorBodyBytes) return;
        // Larger than any error message: passed on as it comes, what was read first included.
        answer.off("data", onData);
        res.writeHead(status, copyHeaders(answer.headers));
        res.write(Buffer.concat(chunks));
        answer.pipe(res);
        answer.on("data", () => waitForBackend());
        answer.once("end", () => settle({ kind: "done", status }));
      };
      answer.on("data", onData);
      answer.on("end", () => {
        if (settled || bytes > maxErrorBodyBytes) return;
        const body = Buffer.concat(chunks);
        const rewritten = openAIErrorBody(status, body, backend.name);
        const headers = copyHeaders(answer.headers);
        const sent = rewritten === undefined ? body : Buffer.from(rewritten);
        if (rewritten !== undefined) headers["content-type"] = "application/json";
        headers["content-length"] = String(sent.length);
        res.writeHead(status, headers);
        res.end(sent);
        settle({ kind: "done", status });
      });
      answer.on("error", (error) => {
        if (settled) return;
        res.destroy(error);
        settle({ kind: "failed", error });
      });
    };

    // The client went away before the answer was complete: stop the backend's work.
    res.on("close", () => {
      if (!res.writableFinished) {
        upstream.destroy();
        settle({ kind: "failed", error: new Error("client disconnected") });
      }
    });

    upstream.end(body);
  });
}

/**
 * An event stream's body that ends when the backend closes its connection (no Content-Length, not
 * chunked: an HTTP/1.0 server such as mlx_lm.server's). Such a body ends the same way whether the
 * answer is whole or the backend died mid-answer; only its last event, the OpenAI stream's
 * `data: [DONE]`, tells them apart. (A chunked body cut short is an error already.)
 */
function closeDelimited(answer: IncomingMessage): boolean {
  const chunked = /chunked/i.test(String(answer.headers["transfer-encoding"] ?? ""));
  return answer.headers["content-length"] === undefined && !chunked;
}

/** The last bytes of a stream (latin1), enough to tell whether they end an event, or its `data: [DONE]`. */
class StreamTail {
  private text = "";

  see(chunk: Buffer): void {
    // Only a chunk's end can matter: a chunk of megabytes is not decoded whole.
    this.text = (this.text + chunk.subarray(-64).toString("latin1")).slice(-64);
  }

  /** Nothing was passed on yet, or the last event is whole. */
  endsEvent(): boolean {
    return this.text === "" || this.text.endsWith("\n\n");
  }

  endsDone(): boolean {
    return /data: ?\[DONE\]\s*$/.test(this.text);
  }
}

function copyHeaders(headers: IncomingHttpHeaders): Record<string, string | string[]> {
  const named = new Set(
    (headers.connection ?? "")
      .split(",")
      .map((name) => name.trim().toLowerCase())
      .filter((name) => name !== ""),
  );
  const copy: Record<string, string | string[]> = {};
  for (const [name, value] of Object.entries(headers)) {
    if (value !== undefined && !HOP_BY_HOP.has(name) && !named.has(name)) copy[name] = value;
  }
  return copy;
}

// A backend URL may carry a path prefix (http://host:8000/api); the request path goes after it.
// The path is normalised already; the check after joining holds even if a caller forgot that.
function joinUrl(base: string, path: string): URL {
  const url = new URL(base);
  const prefix = url.pathname.replace(/\/+$/, "");
  const [pathname, query] = splitQuery(path);
  url.pathname = `${prefix}${pathname}`;
  url.search = query;
  if (!url.pathname.startsWith(`${prefix}/`))
    throw new Error(`request path ${JSON.stringify(pathname)} would leave the backend's prefix ${JSON.stringify(prefix || "/")}`);
  return url;
}

function splitQuery(path: string): [string, string] {
  const at = path.indexOf("?");
  return at === -1 ? [path, ""] : [path.slice(0, at), path.slice(at)];
}
