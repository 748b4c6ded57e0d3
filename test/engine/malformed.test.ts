/** Malformed requests get OpenAI-style errors with the right status, and the server keeps serving. */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { killAll, postJson, requireBuild, startSingle } from "./support.js";

let dir: string;
let baseUrl: string;
let stop: () => Promise<void>;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-malformed-"));
  await makeTestModel(join(dir, "m"), { layers: 2, hidden: 64 });
  ({ baseUrl, stop } = await startSingle(join(dir, "m"), ["--model-name", "served"]));
});
afterAll(async () => {
  await stop?.();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

async function raw(path: string, init: RequestInit): Promise<{ status: number; body: { error?: { message: string; type: string; param: unknown; code: unknown } } }> {
  const r = await fetch(`${baseUrl}${path}`, init);
  return { status: r.status, body: (await r.json()) as { error?: { message: string; type: string; param: unknown; code: unknown } } };
}

describe("malformed requests", () => {
  it("bad JSON → 400", async () => {
    const r = await raw("/v1/chat/completions", { method: "POST", body: "{not json" });
    expect(r.status).toBe(400);
    expect(r.body.error?.type).toBe("invalid_request_error");
    expect(r.body.error?.code).toBe("invalid_json");
  });

  it("unknown model → 404", async () => {
    const r = await postJson(`${baseUrl}/v1/completions`, { model: "other", prompt: "x" });
    expect(r.status).toBe(404);
    expect((r.json.error as { code: string }).code).toBe("model_not_found");
  });

  it("negative max_tokens → 400 naming the field", async () => {
    const r = await postJson(`${baseUrl}/v1/chat/completions`, { model: "served", messages: [{ role: "user", content: "x" }], max_tokens: -5 });
    expect(r.status).toBe(400);
    expect((r.json.error as { param: string }).param).toBe("max_tokens");
  });

  it("missing messages, bad top_logprobs, bad stop → 400", async () => {
    expect((await postJson(`${baseUrl}/v1/chat/completions`, { model: "served" })).status).toBe(400);
    expect((await postJson(`${baseUrl}/v1/chat/completions`, { messages: [{ role: "user", content: "x" }], logprobs: true, top_logprobs: 21 })).status).toBe(400);
    expect((await postJson(`${baseUrl}/v1/completions`, { prompt: "x", logprobs: 6 })).status).toBe(400);
    expect((await postJson(`${baseUrl}/v1/completions`, { prompt: "x", stop: [1] })).status).toBe(400);
    expect((await postJson(`${baseUrl}/v1/completions`, [1, 2])).status).toBe(400);
  });

  it("10 MB body → 413", async () => {
    const big = JSON.stringify({ prompt: "x".repeat(10 * 1024 * 1024) });
    const r = await raw("/v1/completions", { method: "POST", body: big });
    expect(r.status).toBe(413);
    expect(r.body.error?.code).toBe("request_too_large");
  });

  it("unknown route → 404, wrong method → 405", async () => {
    expect((await raw("/v2/nothing", { method: "GET" })).status).toBe(404);
    const r = await fetch(`${baseUrl}/v1/chat/completions`);
    expect(r.status).toBe(405);
    expect(r.headers.get("allow")).toBe("POST");
  });

  it("parameters that would change the output and are not implemented → 400 naming them; their neutral values pass", async () => {
    const refused: Array<[string, unknown]> = [
      ["logit_bias", { "5": 10 }],
      ["presence_penalty", 0.5],
      ["frequency_penalty", -1],
      ["response_format", { type: "json_object" }],
      ["best_of", 3],
      ["suffix", "end"],
    ];
    for (const [key, value] of refused) {
      const r = await postJson(`${baseUrl}/v1/completions`, { prompt: "x", max_tokens: 1, [key]: value });
      expect(r.status, key).toBe(400);
      expect(r.json.error, key).toMatchObject({ param: key, code: "unsupported_parameter", message: `\`${key}\` is not supported by shard-engine` });
    }
    const tools = await postJson(`${baseUrl}/v1/chat/completions`, {
      messages: [{ role: "user", content: "x" }],
      tools: [{ type: "function", function: { name: "f" } }],
    });
    expect(tools.status).toBe(400);
    const neutral = await postJson(`${baseUrl}/v1/chat/completions`, {
      messages: [{ role: "user", content: "x" }],
      max_tokens: 1,
      logit_bias: {},
      presence_penalty: 0,
      frequency_penalty: 0,
      tools: [],
      response_format: { type: "text" },
    });
    expect(neutral.status).toBe(200);
  });

  it("a number past f64's range is named as such; stream_options must be an object", async () => {
    const r = await raw("/v1/completions", { method: "POST", body: '{"prompt": "x", "temperature": 1e999}' });
    expect(r.status).toBe(400);
    expect(r.body.error?.message).toBe("Expected `temperature` to be a number between 0 and 2, got Infinity");
    expect((await postJson(`${baseUrl}/v1/completions`, { prompt: "x", stream: true, stream_options: "x" })).status).toBe(400);
  });

  it("a value nested 200,000 deep → 400 naming the field (not a 500 from a stack overflow)", async () => {
    const deep = "[".repeat(200_000) + "]".repeat(200_000);
    const r = await raw("/v1/completions", { method: "POST", body: `{"prompt": "x", "temperature": ${deep}}` });
    expect(r.status).toBe(400);
    expect(r.body.error?.param).toBe("temperature");
    expect(r.body.error?.message).toBe("Expected `temperature` to be a number between 0 and 2, got an array of 1");
  });

  it("a 3 MB string where a number belongs → 400 quoting only its beginning, not the whole value", async () => {
    const r = await fetch(`${baseUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ prompt: "x", top_p: "A".repeat(3_000_000) }) });
    const text = await r.text();
    expect(r.status).toBe(400);
    expect(text.length).toBeLessThan(1000);
    expect((JSON.parse(text) as { error: { message: string } }).error.message).toBe(
      `Expected \`top_p\` to be a number between 5e-324 and 1, got "${"A".repeat(80)}"… (3000000 characters)`,
    );
  });

  it("keeps serving afterwards", async () => {
    expect((await fetch(`${baseUrl}/health`)).status).toBe(200);
    // Greedy: a sampled end-of-text first token (random weights) would make the count 0 now and then.
    const r = await postJson(`${baseUrl}/v1/completions`, { model: "served", prompt: "hello", max_tokens: 3, temperature: 0 });
    expect(r.status).toBe(200);
    expect((r.json.usage as { completion_tokens: number }).completion_tokens).toBeGreaterThan(0);
  });
});
