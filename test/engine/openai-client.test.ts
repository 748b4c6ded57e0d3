/**
 * The coordinator of a 2-stage cluster (with transport authentication) through the official
 * `openai` client: models, chat and completions, streaming and not, usage, finish_reason, stop,
 * seeds and log probabilities.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import OpenAI from "openai";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { TextCodec } from "../../src/engine/coordinator/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { type Cluster, killAll, requireBuild, startCluster } from "./support.js";

let dir: string;
let cluster: Cluster;
let client: OpenAI;
const model = "tiny-llama";

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-openai-"));
  const modelDir = join(dir, model);
  await makeTestModel(modelDir, { layers: 4, hidden: 64, vocab: 320, seed: 3 });
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, "s3cret-per-launch-token\n");
  cluster = await startCluster(modelDir, { stages: 2, dir, tokenFile });
  client = new OpenAI({ baseURL: `${cluster.baseUrl}/v1`, apiKey: "unused", maxRetries: 0 });
});
afterAll(async () => {
  await cluster?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

describe("openai client against the coordinator", () => {
  it("lists the model", async () => {
    const list = await client.models.list();
    expect(list.data.map((m) => m.id)).toEqual([model]);
  });

  it("chat, non-streaming and streaming give the same greedy text", async () => {
    const request = { model, messages: [{ role: "user" as const, content: "hello there" }], max_tokens: 10, temperature: 0 };
    const full = await client.chat.completions.create(request);
    const choice = full.choices[0]!;
    expect(choice.finish_reason).toBe("length");
    expect(full.usage?.completion_tokens).toBe(10);
    expect(full.usage?.prompt_tokens).toBeGreaterThan(5);
    const stream = await client.chat.completions.create({ ...request, stream: true, stream_options: { include_usage: true } });
    let text = "";
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? "";
      finish = chunk.choices[0]?.finish_reason ?? finish;
      usage = chunk.usage ?? usage;
    }
    expect(text).toBe(choice.message.content);
    expect(finish).toBe("length");
    expect(usage?.completion_tokens).toBe(10);
  });

  it("chat log probabilities with top_logprobs", async () => {
    const r = await client.chat.completions.create({
      model,
      messages: [{ role: "user", content: "hi" }],
      max_tokens: 4,
      temperature: 0,
      logprobs: true,
      top_logprobs: 3,
    });
    const content = r.choices[0]!.logprobs!.content!;
    expect(content).toHaveLength(4);
    for (const entry of content) {
      expect(entry.logprob).toBeLessThan(0);
      expect(entry.top_logprobs).toHaveLength(3);
      // Greedy: the chosen token is the most likely one.
      expect(entry.logprob).toBeCloseTo(entry.top_logprobs[0]!.logprob, 12);
    }
  });

  it("completions, non-streaming and streaming, with integer logprobs", async () => {
    const request = { model, prompt: "the cat sat", max_tokens: 6, temperature: 0, logprobs: 2 };
    const full = await client.completions.create(request);
    const choice = full.choices[0]!;
    expect(choice.logprobs?.tokens).toHaveLength(6);
    expect(choice.logprobs?.token_logprobs).toHaveLength(6);
    expect(choice.logprobs?.top_logprobs).toHaveLength(6);
    expect(choice.logprobs?.text_offset?.[0]).toBe("the cat sat".length);
    const stream = await client.completions.create({ ...request, stream: true });
    let text = "";
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? "";
    expect(text).toBe(choice.text);
  });

  it("a seed reproduces a sampled completion", async () => {
    const request = { model, prompt: "a", max_tokens: 8, temperature: 1.2, seed: 99 };
    const a = await client.completions.create(request);
    const b = await client.completions.create(request);
    expect(a.choices[0]!.text).toBe(b.choices[0]!.text);
    expect(a.usage?.completion_tokens).toBe(8);
  });

  it("stops at a stop string", async () => {
    const base = await client.completions.create({ model, prompt: "x", max_tokens: 12, temperature: 0 });
    const text = base.choices[0]!.text;
    // Take a stop string from the middle of the greedy text: the reply must end right before it.
    const stop = text.slice(3, 5);
    const r = await client.completions.create({ model, prompt: "x", max_tokens: 12, temperature: 0, stop: [stop] });
    expect(r.choices[0]!.finish_reason).toBe("stop");
    expect(r.choices[0]!.text).toBe(text.slice(0, text.indexOf(stop)));
  });

  it("runs no token past a request's end: stage 0 sends prompt + completion − 1 rows, and no sequence is left", async () => {
    // The coordinator starts each next token's run before it writes the last one out; a run
    // started after the last token would send one row too many.
    const stats = async (): Promise<Array<{ rowsSentDownstream: number; sequences: number; kvBytes: number }>> =>
      ((await (await fetch(`${cluster.baseUrl}/debug/stats`)).json()) as { stages: Array<{ rowsSentDownstream: number; sequences: number; kvBytes: number }> }).stages;
    const greedy = (await client.completions.create({ model, prompt: "x", max_tokens: 12, temperature: 0 })).choices[0]!.text;
    const stop = greedy.slice(3, 5);
    const requests = [
      { model, prompt: "x", max_tokens: 1, temperature: 0 },
      { model, prompt: "x", max_tokens: 7, temperature: 0 },
      { model, prompt: "x", max_tokens: 12, temperature: 0, stop: [stop] },
    ];
    for (const request of requests) {
      for (const stream of [false, true]) {
        const before = (await stats())[0]!.rowsSentDownstream;
        let usage: { prompt_tokens: number; completion_tokens: number } | undefined;
        if (stream) {
          for await (const chunk of await client.completions.create({ ...request, stream: true, stream_options: { include_usage: true } })) usage = chunk.usage ?? usage;
        } else usage = (await client.completions.create(request)).usage;
        const after = await stats();
        expect(usage, JSON.stringify(request)).toBeDefined();
        expect(after[0]!.rowsSentDownstream - before, `${JSON.stringify(request)} stream=${stream}`).toBe(usage!.prompt_tokens + usage!.completion_tokens - 1);
        // A request's release travels down the pipeline stage by stage, unacknowledged, while a
        // stats request goes to each stage directly: on a busy machine it can reach stage 1 first.
        let left = after;
        for (const deadline = Date.now() + 5000; left.some((s) => s.sequences > 0) && Date.now() < deadline; left = await stats()) {
          await new Promise((r) => setTimeout(r, 20));
        }
        expect(left.map((s) => [s.sequences, s.kvBytes])).toEqual([
          [0, 0],
          [0, 0],
        ]);
      }
    }
  });

  it("long prompts: one that cannot fit is refused before it is tokenized, a long one is tokenized off the event loop; the pipeline keeps serving", async () => {
    const post = async (prompt: string): Promise<{ status: number; error: { message: string; param: string; code: string } }> => {
      const r = await fetch(`${cluster.baseUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ model, prompt, max_tokens: 1 }) });
      return { status: r.status, error: ((await r.json()) as { error: { message: string; param: string; code: string } }).error };
    };
    // Four million characters: tokenized on the event loop (about 1 µs a character) they would
    // hold it past the stage links' liveness bound (2.5 s) and break the pipeline.
    const huge = await post("the cat sat. ".repeat(300_000));
    expect(huge.status).toBe(400);
    expect(huge.error).toMatchObject({ param: "prompt", code: "context_length_exceeded" });
    expect(huge.error.message).toMatch(/^The prompt \(3900000 characters\) cannot fit the context of \d+ tokens/);
    // Long enough for the tokenizer thread, short enough to pass the character bound: refused
    // only once tokenized, with the count the model's own tokenizer gives.
    const codec = new TextCodec(join(dir, model));
    const long = "é ".repeat(12_000);
    expect(long.length).toBeLessThanOrEqual(8192 * codec.longestTokenChars);
    const counted = await post(long);
    expect(counted.status).toBe(400);
    expect(counted.error.message).toBe(`The prompt (${codec.encode(long).length} tokens) leaves no room in the context of 8192 tokens`);
    expect(counted.error.param).toBe("prompt");
    const after = await client.completions.create({ model, prompt: "hello", max_tokens: 4, temperature: 0 });
    expect(after.choices[0]?.text.length).toBeGreaterThan(0);
    expect([cluster.coordinator, ...cluster.stages].every((p) => p.child.exitCode === null && p.child.signalCode === null)).toBe(true);
  });

  it("chats that would be long prompts by their roles or their number of messages: refused at once, or tokenized off the event loop; the pipeline keeps serving", async () => {
    const post = async (messages: unknown[]): Promise<{ status: number; ms: number; error?: { message: string; param: string; code: string } }> => {
      const started = Date.now();
      const r = await fetch(`${cluster.baseUrl}/v1/chat/completions`, { method: "POST", body: JSON.stringify({ model, messages, max_tokens: 1 }) });
      const body = (await r.json()) as { error?: { message: string; param: string; code: string } };
      return { status: r.status, ms: Date.now() - started, error: body.error };
    };
    // A role of two million characters: rendered into the prompt by the template, it was counted
    // nowhere and tokenized on the event loop for seconds, past the stage links' liveness bound.
    const longRole = await post([{ role: "u".repeat(2_000_000), content: "hi" }]);
    expect(longRole.status).toBe(400);
    expect(longRole.error).toMatchObject({ param: "messages[0].role" });
    expect(longRole.error?.message).toMatch(/^Expected messages\[0\]\.role to name a role .* \(at most 64 characters\); it has 2000000$/);
    // More messages than the context has tokens (8192), each empty.
    const many = await post(Array.from({ length: 100_000 }, () => ({ role: "user", content: "" })));
    expect(many.status).toBe(400);
    expect(many.error).toMatchObject({ param: "messages", code: "context_length_exceeded" });
    expect(many.error?.message).toBe("The prompt has 100000 messages, more than the context has tokens (8192): the chat template gives each message tokens of its own");
    // Fewer messages, still a long prompt by their markers alone: tokenized on the tokenizer
    // thread and refused by its count, while the stage links stay alive.
    const markers = await post(Array.from({ length: 8_000 }, () => ({ role: "user", content: "" })));
    expect(markers.status).toBe(400);
    expect(markers.error?.message).toMatch(/^The prompt \(\d+ tokens\) leaves no room in the context of 8192 tokens$/);
    const after = await client.chat.completions.create({ model, messages: [{ role: "user", content: "hello" }], max_tokens: 4, temperature: 0 });
    expect(after.choices[0]?.message.content?.length).toBeGreaterThan(0);
    expect([cluster.coordinator, ...cluster.stages].every((p) => p.child.exitCode === null && p.child.signalCode === null)).toBe(true);
  });

  it("refuses an unknown model with 404", async () => {
    await expect(client.chat.completions.create({ model: "nope", messages: [{ role: "user", content: "x" }] })).rejects.toMatchObject({ status: 404 });
  });
});
