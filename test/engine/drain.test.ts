/**
 * SIGTERM stops the HTTP process gracefully: new requests are answered 503 (server_shutting_down)
 * at once, a request being generated may finish within --drain-ms, and one still generating then
 * ends with an error event rather than a cut connection; the process then ends by the signal.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, test } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { killAll, requireBuild, startSingle } from "./support.js";

let dir: string;
let modelDir: string;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-drain-"));
  modelDir = join(dir, "m");
  // Its greedy reply to "go" runs to 5000 tokens (several seconds here) without an end-of-sequence token.
  await makeTestModel(modelDir, { layers: 4, hidden: 64, seed: 5 });
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

/** A streamed completion: its events as they arrive, and how the stream ended. */
function stream(baseUrl: string, maxTokens: number): { events: string[]; firstEvent: Promise<void>; ended: Promise<"end" | string> } {
  const events: string[] = [];
  let first!: () => void;
  const firstEvent = new Promise<void>((resolve) => (first = resolve));
  const ended = (async (): Promise<"end" | string> => {
    // Greedy: this prompt's greedy reply does not end early on this model (the same every run).
    const response = await fetch(`${baseUrl}/v1/completions`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ prompt: "go", max_tokens: maxTokens, stream: true, temperature: 0 }),
    });
    expect(response.status).toBe(200);
    const reader = response.body!.getReader();
    let text = "";
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return "end";
        text += Buffer.from(value).toString("utf8");
        const parts = text.split("\n\n");
        text = parts.pop()!;
        for (const part of parts) if (part.startsWith("data: ")) events.push(part.slice(6));
        if (events.length > 0) first();
      }
    } catch (error) {
      return (error as Error).message;
    }
  })();
  return { events, firstEvent, ended };
}

test("a request still generating when the drain time is over ends with an error event, new ones get 503 at once, and the process ends by SIGTERM", async () => {
  const engine = await startSingle(modelDir, ["--drain-ms", "800"]);
  const long = stream(engine.baseUrl, 5000);
  await long.firstEvent;
  const signalledAt = Date.now();
  engine.proc.child.kill("SIGTERM");
  await new Promise((resolve) => setTimeout(resolve, 100));
  const refused = await fetch(`${engine.baseUrl}/v1/completions`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ prompt: "hi", max_tokens: 2 }),
  });
  expect(refused.status).toBe(503);
  expect(refused.headers.get("retry-after")).toBe("2");
  expect(((await refused.json()) as { error: { code: string } }).error.code).toBe("server_shutting_down");
  // The stream ran on through the drain time, then ended cleanly with the error as its last event.
  expect(await long.ended).toBe("end");
  const endedAfterMs = Date.now() - signalledAt;
  expect(endedAfterMs).toBeGreaterThanOrEqual(700);
  expect(long.events.at(-1)).toMatch(/"code":"server_shutting_down"/);
  expect(long.events).not.toContain("[DONE]");
  expect(long.events.length).toBeGreaterThan(3);
  expect(await engine.proc.exited).toBe("SIGTERM");
}, 60_000);

test("a request that finishes within the drain time is answered whole, and the process ends as soon as it is", async () => {
  const engine = await startSingle(modelDir, ["--drain-ms", "20000"]);
  const short = stream(engine.baseUrl, 600);
  await short.firstEvent;
  const signalledAt = Date.now();
  engine.proc.child.kill("SIGTERM");
  expect(await short.ended).toBe("end");
  expect(short.events.at(-1)).toBe("[DONE]");
  expect(short.events.some((e) => e.includes('"error"'))).toBe(false);
  expect(await engine.proc.exited).toBe("SIGTERM");
  // Not the whole drain time: it ended once nothing was left to answer.
  expect(Date.now() - signalledAt).toBeLessThan(15_000);
}, 60_000);

test("an idle process ends at once on SIGTERM", async () => {
  const engine = await startSingle(modelDir, ["--drain-ms", "20000"]);
  const signalledAt = Date.now();
  engine.proc.child.kill("SIGTERM");
  expect(await engine.proc.exited).toBe("SIGTERM");
  expect(Date.now() - signalledAt).toBeLessThan(5_000);
}, 60_000);
