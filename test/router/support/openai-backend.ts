/**
 * A small OpenAI-format HTTP backend standing in for a coordinator: answers chat and text
 * completions, streaming (SSE) or not, and records what it saw. `holdStream` keeps a streamed
 * answer open after its first chunk until `release()`, so tests can tell streaming from buffering.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export type OpenAIBackend = {
  name: string;
  url: string;
  /** Requests received, in order. */
  requests: Array<{ path: string; model: string; stream: boolean; authorization?: string; headers: IncomingHttpHeaders }>;
  /** Headers added to every answer (none by default). */
  answerHeaders: Record<string, string>;
  /** Streams whose client went away before the backend finished. */
  aborted: number;
  holdStream: boolean;
  /** Lets every held stream finish. */
  release(): void;
  close(): Promise<void>;
};

export async function startOpenAIBackend(name: string, host = "127.0.0.1"): Promise<OpenAIBackend> {
  let releases: Array<() => void> = [];
  const backend: OpenAIBackend = {
    name,
    url: "",
    requests: [],
    aborted: 0,
    answerHeaders: {},
    holdStream: false,
    release: () => {
      for (const release of releases) release();
      releases = [];
    },
    close: () =>
      new Promise((done) => {
        backend.release();
        server.closeAllConnections();
        server.close(() => done());
      }),
  };

  const server: Server = createServer((req, res) => {
    void readJson(req).then(async (body) => {
      const path = req.url ?? "/";
      if (req.method === "GET" && path === "/health") {
        res.writeHead(200, { "content-type": "application/json" }).end('{"status":"ok"}');
        return;
      }
      const model = typeof body.model === "string" ? body.model : "";
      const stream = body.stream === true;
      backend.requests.push({ path, model, stream, authorization: req.headers.authorization, headers: req.headers });
      for (const [header, value] of Object.entries(backend.answerHeaders)) res.setHeader(header, value);
      const text = `hello from ${name}`;
      const id = `chatcmpl-${backend.requests.length}`;
      if (!stream) {
        const answer = path.endsWith("/chat/completions")
          ? {
              id,
              object: "chat.completion",
              created: 1,
              model,
              choices: [{ index: 0, message: { role: "assistant", content: text }, finish_reason: "stop" }],
              usage: { prompt_tokens: 1, completion_tokens: 3, total_tokens: 4 },
            }
          : { id, object: "text_completion", created: 1, model, choices: [{ index: 0, text, finish_reason: "stop", logprobs: null }] };
        const json = JSON.stringify(answer);
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(json) }).end(json);
        return;
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      let finished = false;
      res.on("close", () => {
        if (!finished) backend.aborted += 1;
      });
      const words = text.split(" ");
      for (const [index, word] of words.entries()) {
        const chunk = {
          id,
          object: "chat.completion.chunk",
          created: 1,
          model,
          choices: [{ index: 0, delta: index === 0 ? { role: "assistant", content: word } : { content: ` ${word}` }, finish_reason: null }],
        };
        res.write(`data: ${JSON.stringify(chunk)}\n\n`);
        if (index === 0 && backend.holdStream) await new Promise<void>((done) => releases.push(done));
        if (res.destroyed) return;
      }
      const last = { id, object: "chat.completion.chunk", created: 1, model, choices: [{ index: 0, delta: {}, finish_reason: "stop" }] };
      finished = true;
      res.end(`data: ${JSON.stringify(last)}\n\ndata: [DONE]\n\n`);
    });
  });
  await new Promise<void>((done) => server.listen(0, host, done));
  backend.url = `http://${host}:${(server.address() as AddressInfo).port}`;
  return backend;
}

async function readJson(req: IncomingMessage): Promise<Record<string, unknown>> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    const json: unknown = JSON.parse(Buffer.concat(chunks).toString("utf8"));
    return typeof json === "object" && json !== null ? (json as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
