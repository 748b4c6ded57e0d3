/**
 * The embedded router bounds what a hung backend or a client that reads nothing can cost: a backend
 * that sends nothing (not even its head) for the upstream idle deadline is answered 504
 * `upstream_timeout`; one that falls silent mid-stream has the client's event stream ended cleanly
 * with an error event of that code; a client that reads nothing of an answer the backend has more
 * of is let go after the client stall deadline, and so is the backend's connection (its work), the
 * router's buffers no longer hiding the slow reader from the backend. The router runs in this
 * process with short deadlines, in front of a raw TCP backend whose behaviour the model names.
 */
import { connect, createServer, type Server, type Socket } from "node:net";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { afterAll, beforeAll, expect, it } from "vitest";
import { stringify } from "yaml";
import { startRouter, type RunningRouter } from "../../src/router/index.js";
import { allocateHosts } from "../support/test-world.js";

let dir: string;
let backend: Server;
let router: RunningRouter;
const sockets = new Set<Socket>();
/** When the flooding backend's connection closed, ms since the epoch. */
let floodClosedAt: number | undefined;
let floodBytes = 0;

const event = (text: string): string => `data: ${JSON.stringify({ object: "text_completion", choices: [{ index: 0, text, finish_reason: null }] })}\n\n`;
const chunked = (text: string): string => `${Buffer.byteLength(text).toString(16)}\r\n${text}\r\n`;

beforeAll(async () => {
  dir = await mkdtemp(join(tmpdir(), "shardctl-upstream-timeouts-"));
  const [backendHost, routerHost] = (await allocateHosts(2)) as [string, string];
  backend = createServer((socket) => {
    sockets.add(socket);
    socket.on("close", () => sockets.delete(socket));
    socket.on("error", () => undefined);
    let received = "";
    socket.on("data", (chunk: Buffer) => {
      received += chunk.toString("latin1");
      const headEnd = received.indexOf("\r\n\r\n");
      const length = Number(/content-length: *(\d+)/i.exec(received)?.[1] ?? "0");
      if (headEnd < 0 || received.length < headEnd + 4 + length) return;
      const model = /"model":"(\w+)"/.exec(received.slice(headEnd + 4))?.[1];
      received = "";
      if (model === "silent") return; // the request is taken, nothing ever answered
      socket.write("HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n");
      socket.write(chunked(event("one")));
      if (model === "stalls") return; // then nothing more, the connection held open
      if (model === "half") return void socket.write(chunked('data: {"object":"text_completion","choi')); // half an event, then nothing
      // "flood": events as fast as the connection takes them, until it is closed.
      const piece = chunked(event("x".repeat(60_000)));
      const pump = (): void => {
        while (!socket.destroyed) {
          floodBytes += piece.length;
          if (!socket.write(piece)) return void socket.once("drain", pump);
        }
      };
      socket.once("close", () => (floodClosedAt = Date.now()));
      pump();
    });
  });
  await new Promise<void>((resolve) => backend.listen(0, backendHost, resolve));
  const port = (backend.address() as { port: number }).port;
  const config = join(dir, "router.yaml");
  await writeFile(
    config,
    `server:\n  bind_address: "${routerHost}:0"\n${stringify({ backends: [{ name: "raw", url: `http://${backendHost}:${port}`, models: ["silent", "stalls", "half", "flood"] }] })}`,
  );
  router = await startRouter({ configFile: config, watch: false, upstreamIdleMs: 1_000, clientStallMs: 1_500, logger: pino({ level: "silent" }) });
});

afterAll(async () => {
  await router?.close();
  for (const socket of sockets) socket.destroy();
  await new Promise((resolve) => backend?.close(resolve));
  await rm(dir, { recursive: true, force: true });
});

function ask(model: string): Promise<Response> {
  return fetch(`${router.url}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ model, prompt: "hi", stream: true, max_tokens: 2 }),
  });
}

it("a backend that sends nothing, not even its head: 504 upstream_timeout after the idle deadline", async () => {
  const started = Date.now();
  const response = await ask("silent");
  const took = Date.now() - started;
  expect(response.status).toBe(504);
  expect(((await response.json()) as { error: { code: string; message: string } }).error).toMatchObject({
    code: "upstream_timeout",
    message: "backend raw: the backend sent nothing for 1 s",
  });
  expect(took).toBeGreaterThanOrEqual(900);
  expect(took).toBeLessThan(10_000);
});

it("a backend that falls silent mid-stream: the client's stream ends cleanly with an upstream_timeout error event", async () => {
  const response = await ask("stalls");
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  let text = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    text += Buffer.from(value).toString("utf8");
  }
  const events = text.split("\n\n").filter((e) => e.startsWith("data: "));
  expect(events).toHaveLength(2);
  expect(events[1]).toMatch(/"code":"upstream_timeout"/);
});

it("a backend that falls silent in the middle of an event: the error event still comes as an event of its own", async () => {
  const response = await ask("half");
  const text = await response.text();
  const events = text.split("\n\n").filter((e) => e.startsWith("data: "));
  expect(events.at(-1)).toMatch(/^data: \{"error":\{.*"code":"upstream_timeout"\}\}$/);
});

it("a client that reads nothing of a flooding answer is let go after the stall deadline, and so is the backend's connection", async () => {
  const url = new URL(router.url);
  const body = JSON.stringify({ model: "flood", prompt: "hi", stream: true });
  const client = connect(Number(url.port), url.hostname);
  await new Promise<void>((resolve) => client.once("connect", resolve));
  const clientClosed = new Promise<void>((resolve) => client.once("close", () => resolve()));
  client.on("error", () => undefined);
  client.write(`POST /v1/completions HTTP/1.1\r\nhost: ${url.host}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  // Reads nothing from here on.
  client.pause();
  const started = Date.now();
  while (floodClosedAt === undefined && Date.now() - started < 30_000) await new Promise((resolve) => setTimeout(resolve, 100));
  expect(floodClosedAt).toBeDefined();
  expect(floodClosedAt! - started).toBeLessThan(20_000);
  // The client's connection was let go too: read now, it ends (after what the buffers held).
  client.on("data", () => undefined);
  client.resume();
  await clientClosed;
  // What the backend sent before it was let go is bounded by the sockets' buffers, not its answer.
  expect(floodBytes).toBeLessThan(256 * 1024 * 1024);
});
