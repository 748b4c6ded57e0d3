/**
 * The coordinator's HTTP port against clients that mean harm, on a real shard-engine bound to
 * loopback:
 * - a web page in the operator's browser (DNS rebinding: a foreign Host name; a cross-site POST:
 *   a foreign Origin or Sec-Fetch-Site) is refused 403, while clients that are not browsers are
 *   served;
 * - uploads that stall after declaring large bodies hold no more than the bodies' budget (64 MiB):
 *   past it a request is answered 503 with Retry-After at once, small requests still pass, and the
 *   room comes back when the stalled clients go;
 * - a stop sequence longer than 1024 characters is refused 400 (each token looks for the stops at
 *   the text's end, so their length bounds that work).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { request as httpRequest } from "node:http";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { killAll, requireBuild, startSingle } from "./support.js";

let dir: string;
let engine: Awaited<ReturnType<typeof startSingle>>;
let host: string;
let port: number;
const model = "tiny-llama";
const sockets: Socket[] = [];

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-hostile-http-"));
  const modelDir = join(dir, model);
  await makeTestModel(modelDir, { layers: 2, hidden: 64, vocab: 320, seed: 3 });
  engine = await startSingle(modelDir, ["--model-name", model, "--threads", "1"]);
  const url = new URL(engine.baseUrl);
  host = url.hostname;
  port = Number(url.port);
}, 60_000);

afterAll(async () => {
  for (const s of sockets) s.destroy();
  await engine?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

/** One request with the headers given (Host included: node's fetch will not send a foreign one). */
function send(method: string, path: string, headers: Record<string, string>, body?: string): Promise<{ status: number; headers: Record<string, unknown>; body: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(
      { host, port, method, path, headers: { ...(body === undefined ? {} : { "content-length": String(Buffer.byteLength(body)) }), ...headers } },
      (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: text }));
      },
    );
    req.on("error", reject);
    req.end(body);
  });
}

const completion = JSON.stringify({ model, prompt: "hello", max_tokens: 2, temperature: 0 });

it("refuses a foreign Host name and browsers' cross-site requests, and serves every other client", async () => {
  const own = `${host}:${port}`;
  const rebound = await send("POST", "/v1/completions", { host: `attacker.example:${port}`, "content-type": "text/plain" }, completion);
  expect(rebound.status).toBe(403);
  expect(JSON.parse(rebound.body)).toMatchObject({ error: { code: "forbidden", message: expect.stringContaining('not "attacker.example') } });
  expect((await send("GET", "/debug/stats", { host: "attacker.example" })).status).toBe(403);

  const crossOrigin = await send("POST", "/v1/completions", { host: own, origin: "http://attacker.example", "content-type": "text/plain" }, completion);
  expect(crossOrigin.status).toBe(403);
  expect(JSON.parse(crossOrigin.body).error.message).toContain('"http://attacker.example"');
  expect((await send("POST", "/v1/completions", { host: own, origin: "null" }, completion)).status).toBe(403);
  expect((await send("POST", "/v1/completions", { host: own, "sec-fetch-site": "cross-site" }, completion)).status).toBe(403);

  // Not a browser (curl, an SDK, the router): no Origin, no Sec-Fetch-Site. Or a page of this server.
  expect((await send("POST", "/v1/completions", { host: own }, completion)).status).toBe(200);
  expect((await send("POST", "/v1/completions", { host: `localhost:${port}` }, completion)).status).toBe(200);
  expect((await send("POST", "/v1/completions", { host: own, origin: `http://${own}`, "sec-fetch-site": "same-origin" }, completion)).status).toBe(200);
  expect((await send("GET", "/health", { host: own })).status).toBe(200);
});

/** A POST that declares a body of `bytes` and sends only its first KiB, then nothing. */
async function stallUpload(bytes: number): Promise<Socket> {
  const socket = connect(port, host);
  sockets.push(socket);
  await new Promise((resolve, reject) => socket.once("connect", resolve).once("error", reject));
  socket.write(
    `POST /v1/completions HTTP/1.1\r\nhost: ${host}:${port}\r\ncontent-type: application/json\r\ncontent-length: ${bytes}\r\n\r\n{"prompt": "${"x".repeat(1000)}`,
  );
  return socket;
}

it("answers 503 at once past the bodies' budget, still serves small requests, and has room again when the stalled clients go", async () => {
  const body = 4 * 1024 * 1024;
  // 15 declared bodies of 4 MiB (and each request's 16 KiB) fit in 64 MiB; a 16th does not.
  const stalled: Socket[] = [];
  for (let i = 0; i < 15; i++) stalled.push(await stallUpload(body));
  await new Promise((r) => setTimeout(r, 300));
  const started = Date.now();
  const refused = await new Promise<string>((resolve, reject) => {
    const socket = connect(port, host);
    sockets.push(socket);
    let text = "";
    socket.on("data", (c: Buffer) => {
      text += c.toString("latin1");
      if (text.includes("\r\n\r\n") && text.includes("}}")) resolve(text);
    });
    socket.once("error", reject);
    socket.write(`POST /v1/completions HTTP/1.1\r\nhost: ${host}:${port}\r\ncontent-length: ${body}\r\n\r\n{"prompt": "`);
  });
  expect(Date.now() - started).toBeLessThan(5_000);
  expect(refused).toMatch(/^HTTP\/1\.1 503 /);
  expect(refused.toLowerCase()).toContain("retry-after: 1");
  expect(refused).toContain('"code":"server_busy"');
  expect(refused).toContain("64 MiB");

  // A small request still fits beside them.
  expect((await send("POST", "/v1/completions", { host: `${host}:${port}` }, completion)).status).toBe(200);

  for (const s of stalled) s.destroy();
  // The room comes back: a large declared body is read and parsed (its prompt is then too long: 400, not 503).
  const large = JSON.stringify({ model, prompt: "y".repeat(3 * 1024 * 1024), max_tokens: 1 });
  const deadline = Date.now() + 10_000;
  let answer = await send("POST", "/v1/completions", { host: `${host}:${port}` }, large);
  while (answer.status === 503 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 100));
    answer = await send("POST", "/v1/completions", { host: `${host}:${port}` }, large);
  }
  expect(answer.status, answer.body).toBe(400);
  expect(JSON.parse(answer.body).error.code).toBe("context_length_exceeded");
});

it("refuses a stop sequence over 1024 characters, and takes one of 1024", async () => {
  const own = { host: `${host}:${port}` };
  const tooLong = await send("POST", "/v1/completions", own, JSON.stringify({ model, prompt: "hello", max_tokens: 2, stop: ["a".repeat(1025)] }));
  expect(tooLong.status).toBe(400);
  expect(JSON.parse(tooLong.body).error).toMatchObject({ param: "stop", message: "A stop sequence may be at most 1024 characters; one has 1025" });
  expect((await send("POST", "/v1/completions", own, JSON.stringify({ model, prompt: "hello", max_tokens: 2, stop: ["a".repeat(1024)] }))).status).toBe(200);
});
