/**
 * A streaming client that stops reading. The coordinator writes a stream's chunks as they are
 * generated; once the client's socket buffers are full it waits for the client (generation of that
 * stream pauses, one run in flight at most) instead of buffering the whole completion in memory,
 * and a client that reads nothing for `--client-stall-ms` is disconnected and its slot freed.
 * A client that pauses for less than that gets its whole stream.
 *
 * Real processes and sockets: one shard-engine on loopback with one slot, clients on raw TCP
 * sockets that read nothing (the kernel's buffers fill) or pause and resume.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { killAll, requireBuild, startSingle } from "./support.js";

let dir: string;
let engine: Awaited<ReturnType<typeof startSingle>>;
const model = "tiny-llama";
/** How long the engine lets a stream stay backed up, ms. */
const clientStallMs = 1500;
/** Tokens asked for: with 20 alternatives each (~1.5 KB of JSON a token), far more than a socket's buffers hold. */
const maxTokens = 7000;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-stalled-client-"));
  const modelDir = join(dir, model);
  // Seed 5: greedy decoding of both prompts below never samples the end-of-sequence token in 7000
  // tokens (checked: the stream would otherwise end early, whatever its client does).
  await makeTestModel(modelDir, { layers: 2, hidden: 64, vocab: 320, seed: 5 });
  engine = await startSingle(modelDir, ["--model-name", model, "--max-sequences", "1", "--client-stall-ms", String(clientStallMs), "--threads", "1"]);
}, 60_000);

afterAll(async () => {
  await engine?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

/** A streamed chat completion with 20 alternatives per token, on a raw socket that reads nothing yet. */
function openStream(prompt: string): Socket {
  const { hostname, port } = new URL(engine.baseUrl);
  const body = JSON.stringify({
    model,
    messages: [{ role: "user", content: prompt }],
    max_tokens: maxTokens,
    temperature: 0,
    logprobs: true,
    top_logprobs: 20,
    stream: true,
  });
  const socket = connect(Number(port), hostname);
  socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: ${hostname}\r\ncontent-type: application/json\r\ncontent-length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  // Paused: the socket reads its first few KiB into its own buffer and then nothing.
  socket.pause();
  return socket;
}

/** The engine's log lines (JSON on stderr) with `msg`. */
function logLines(msg: string): Array<Record<string, unknown>> {
  return engine.proc
    .stderr()
    .split("\n")
    .filter((l) => l.startsWith("{"))
    .map((l) => JSON.parse(l) as Record<string, unknown>)
    .filter((l) => l.msg === msg);
}

async function waitFor<T>(what: string, probe: () => T | undefined, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const found = probe();
    if (found !== undefined) return found;
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms; the engine said:\n${engine.proc.stderr().slice(-3000)}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

it("pauses a stream whose client reads nothing, then disconnects it and frees its slot", async () => {
  const socket = openStream("hello");
  socket.on("error", () => undefined);
  const started = Date.now();
  const stalled = await waitFor("the stalled client's disconnection", () => logLines("the client read nothing of its stream for too long; disconnected")[0], 30_000);
  // Generation waited for the client: far fewer chunks than tokens asked for were written, and
  // the request never ran to its end.
  expect(stalled.chunksWritten as number).toBeGreaterThan(100);
  expect(stalled.chunksWritten as number).toBeLessThan(maxTokens * 0.8);
  expect(logLines("request done")).toEqual([]);
  expect(Date.now() - started).toBeLessThan(30_000);
  await waitFor("the cancelled sequence", () => logLines("client disconnected; sequence cancelled")[0], 10_000);
  // (A paused socket does not see the server's close: it reads nothing, the end included.)
  socket.destroy();

  // The only slot is free again: a request is answered at once.
  const response = await fetch(`${engine.baseUrl}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ model, prompt: "hello", max_tokens: 4, temperature: 0 }),
    signal: AbortSignal.timeout(10_000),
  });
  expect(response.status).toBe(200);
  expect(((await response.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBeGreaterThan(0);
}, 60_000);

it("gives a client that pauses for less than the stall bound its whole stream", async () => {
  const before = logLines("request done").length;
  const socket = openStream("the cat");
  // Long enough for the buffers to fill and generation to wait (the test above shows when it does).
  await new Promise((r) => setTimeout(r, clientStallMs / 2));
  const chunks: Buffer[] = [];
  socket.on("data", (c: Buffer) => chunks.push(c));
  await new Promise<void>((resolve, reject) => {
    socket.on("data", () => {
      if (Buffer.concat(chunks.slice(-2)).toString("latin1").includes("data: [DONE]")) resolve();
    });
    socket.once("close", () => reject(new Error("closed before [DONE]")));
    socket.resume();
  });
  socket.destroy();
  const text = Buffer.concat(chunks).toString("utf8");
  const events = text
    .split("\n\n")
    .map((e) => e.replace(/^[\s\S]*?data: /, ""))
    .filter((e) => e.startsWith("{"))
    .map((e) => JSON.parse(e) as { choices: Array<{ logprobs: { content: unknown[] } | null; finish_reason: string | null }> });
  const tokens = events.reduce((n, e) => n + (e.choices[0]?.logprobs?.content.length ?? 0), 0);
  // The engine logs the request's end just after its last event: waited for (up to 5 s), so the
  // line read is this request's, not the one before it.
  for (let i = 0; i < 100 && logLines("request done").length <= before; i++) await new Promise((r) => setTimeout(r, 50));
  const done = logLines("request done").at(-1) as { completionTokens: number; finishReason: string };
  // Every token generated reached the client, and the request ran to its own end.
  expect(done.completionTokens).toBe(maxTokens);
  expect(tokens).toBe(done.completionTokens);
  expect(events.at(-1)?.choices[0]?.finish_reason).toBe(done.finishReason);
  expect(logLines("the client read nothing of its stream for too long; disconnected")).toHaveLength(1);
}, 60_000);
