/**
 * A streamed completion through the embedded router (`shardctl router`, from the build) from a
 * backend that answers as an HTTP/1.0 server does (mlx_lm.server's: no Content-Length, not chunked,
 * the body ends when the connection closes). Whole, it ends with `data: [DONE]` and the client's
 * stream ends cleanly; cut short by the backend's death (its connection closed before that event),
 * the client's stream must fail, not end as if the short answer were whole.
 */
import { createServer, type Server, type Socket } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { gzipSync } from "node:zlib";
import { afterAll, beforeAll, expect, it } from "vitest";
import { stringify } from "yaml";
import { allocateHosts } from "../support/test-world.js";
import { spawnRouter, type RouterProcess } from "./support/router-process.js";

let dir: string;
let backend: Server;
let router: RouterProcess;
const sockets = new Set<Socket>();

const event = (text: string): string => `data: ${JSON.stringify({ object: "text_completion", choices: [{ index: 0, text, finish_reason: null }] })}\n\n`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-cut-streams-"));
  const [backendHost, routerHost] = (await allocateHosts(2)) as [string, string];
  // The model named in the request says how the answer ends: "whole" with [DONE], "cut" without.
  backend = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    let received = "";
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
      const headEnd = received.indexOf("\r\n\r\n");
      const length = Number(/content-length: *(\d+)/i.exec(received)?.[1] ?? "0");
      if (headEnd < 0 || received.length < headEnd + 4 + length) return;
      const requested = received.slice(headEnd + 4);
      // mlx_lm.server's own error answers: JSON of its own shape, and a 404 of plain text labelled JSON.
      if (requested.includes('"own-error"'))
        return void socket.end('HTTP/1.0 400 Bad Request\r\nContent-Type: application/json\r\n\r\n{"error": "max_tokens must be at least 1"}');
      if (requested.includes('"text-404"')) return void socket.end("HTTP/1.0 404 Not Found\r\nContent-Type: application/json\r\n\r\nNot Found");
      if (requested.includes('"gzip-error"')) {
        const body = gzipSync(JSON.stringify({ error: "compressed words" }));
        socket.write(`HTTP/1.0 429 Too Many Requests\r\nContent-Type: application/json\r\nContent-Encoding: gzip\r\nContent-Length: ${body.length}\r\n\r\n`);
        return void socket.end(body);
      }
      if (requested.includes('"openai-error"')) {
        return void socket.end(
          'HTTP/1.0 400 Bad Request\r\nContent-Type: application/json\r\n\r\n{"error": {"message": "m", "type": "invalid_request_error", "param": null, "code": "c"}}',
        );
      }
      const whole = requested.includes('"whole"');
      socket.write("HTTP/1.0 200 OK\r\nServer: BaseHTTP/0.6 Python/3.11\r\nContent-type: text/event-stream\r\nCache-Control: no-cache\r\n\r\n");
      socket.write(event("one"));
      socket.write(event(" two"));
      setTimeout(() => (whole ? socket.end("data: [DONE]\n\n") : socket.end()), 50);
    });
  });
  await new Promise<void>((resolve) => backend.listen(0, backendHost, resolve));
  const port = (backend.address() as { port: number }).port;
  const config = join(dir, "router.yaml");
  await writeFile(
    config,
    `server:\n  bind_address: "${routerHost}:0"\n${stringify({ backends: [{ name: "http10", url: `http://${backendHost}:${port}`, models: ["whole", "cut", "own-error", "text-404", "openai-error", "gzip-error"] }] })}`,
  );
  router = await spawnRouter(config);
});

afterAll(async () => {
  await router?.stop();
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => backend?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

/** Read a streamed completion to its end: the text, or the error the stream failed with. */
async function stream(model: string): Promise<{ text: string; error?: string }> {
  const response = await fetch(`${router.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "hi", stream: true, max_tokens: 2 }),
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  let text = "";
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) return { text };
      text += Buffer.from(value).toString("utf8");
    }
  } catch (error) {
    return { text, error: String(error) };
  }
}

it("a whole answer (its last event [DONE]) ends cleanly", async () => {
  const answer = await stream("whole");
  expect(answer.error).toBeUndefined();
  expect(answer.text).toContain(" two");
  expect(answer.text.trimEnd().endsWith("data: [DONE]")).toBe(true);
});

it("an answer whose backend closed before [DONE] fails the client's stream, after the events that came and an error event saying why", async () => {
  const answer = await stream("cut");
  expect(answer.text).toContain(" two");
  // An OpenAI client raises the event's error, with its message; one that reads no events sees the stream fail.
  const last = answer.text.trimEnd().split("\n\n").at(-1)!;
  expect(JSON.parse(last.replace(/^data: /, ""))).toMatchObject({
    error: { type: "api_error", code: "upstream_failed", message: expect.stringMatching(/^backend http10: the backend's event stream ended without its last event/) },
  });
  expect(answer.error).toMatch(/terminated|closed|reset|aborted/i);
  // The router says why it cut the stream (its log line may follow the client's error by a moment).
  const deadline = Date.now() + 5_000;
  const said = () => router.logs().some((line) => JSON.stringify(line).includes("without its last event"));
  while (!said() && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
  expect(said()).toBe(true);
});

it("a backend's error answers in its own shape reach the client in OpenAI's; one in OpenAI's shape passes untouched", async () => {
  const ask = async (model: string) => {
    const response = await fetch(`${router.url}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ model, prompt: "hi", max_tokens: 0 }),
    });
    return { status: response.status, type: response.headers.get("content-type"), body: (await response.json()) as unknown };
  };
  expect(await ask("own-error")).toEqual({
    status: 400,
    type: "application/json",
    body: { error: { message: "backend http10: max_tokens must be at least 1", type: "invalid_request_error", param: null, code: "backend_400" } },
  });
  expect(await ask("text-404")).toEqual({
    status: 404,
    type: "application/json",
    body: { error: { message: "backend http10: Not Found", type: "not_found_error", param: null, code: "backend_404" } },
  });
  // A compressed answer passes as it came (its bytes are not words to rewrite): the client decodes it.
  expect(await ask("gzip-error")).toEqual({ status: 429, type: "application/json", body: { error: "compressed words" } });
  expect(await ask("openai-error")).toEqual({
    status: 400,
    type: "application/json",
    body: { error: { message: "m", type: "invalid_request_error", param: null, code: "c" } },
  });
});
