/**
 * Overload and a pipeline lost under queued requests, on a 2-stage pipeline whose coordinator is
 * told `--max-sequences 1 --max-queued 1`: one request generates, one waits, and one more is
 * answered 429 `queue_full` with Retry-After at once (what OpenAI clients back off on), not held
 * silent until its client's timeout. A stream that was waiting when a stage dies is answered 503
 * `pipeline_broken` with Retry-After (which clients retry), not a 200 whose stream holds only an
 * error: its head waits for its first token.
 */
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { type Cluster, killAll, requireBuild, startCluster } from "./support.js";

let dir: string;
let cluster: Cluster;
const model = "tiny-llama";

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-overload-"));
  const modelDir = join(dir, model);
  await makeTestModel(modelDir, { layers: 4, hidden: 64, vocab: 320, seed: 3 });
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, "overload-token\n");
  cluster = await startCluster(modelDir, {
    stages: 2,
    dir,
    tokenFile,
    coordinatorArgs: ["--model-name", model, "--max-sequences", "1", "--max-queued", "1", "--context-length", "2048"],
  });
});
afterAll(async () => {
  await cluster?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

const post = (body: object): Promise<Response> =>
  fetch(`${cluster.baseUrl}/v1/completions`, { method: "POST", body: JSON.stringify({ model, temperature: 0, ...body }) });

/** A stream that holds the only slot: resolved once its first chunk arrived; `rest` reads it to its end. */
async function holdSlot(maxTokens: number): Promise<{ rest: Promise<string> }> {
  // Greedy from this prompt the test model runs far past 1000 tokens without an end of text.
  const response = await post({ prompt: "the cat", max_tokens: maxTokens, stream: true });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const first = await reader.read();
  const rest = (async () => {
    let text = new TextDecoder().decode(first.value);
    try {
      for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) text += new TextDecoder().decode(chunk.value);
    } catch (error) {
      text += `\n[read failed: ${(error as Error).message}]`;
    }
    return text;
  })();
  return { rest };
}

/** Resolves once the coordinator's queue holds `n` requests (read from its stats). */
async function untilQueued(n: number): Promise<void> {
  for (let i = 0; i < 500; i++) {
    const stats = (await (await fetch(`${cluster.baseUrl}/debug/stats`)).json()) as { requests: { queued: number } };
    if (stats.requests.queued >= n) return;
    await new Promise((r) => setTimeout(r, 10));
  }
  throw new Error(`the queue never held ${n} requests`);
}

it("refuses a request with 429 queue_full and Retry-After once --max-queued requests wait; the waiting one is served", async () => {
  const holder = await holdSlot(300);
  const waiting = post({ prompt: "a dog", max_tokens: 4 });
  await untilQueued(1);
  const refused = await post({ prompt: "one too many", max_tokens: 4 });
  expect(refused.status).toBe(429);
  expect(refused.headers.get("retry-after")).toBe("1");
  const body = (await refused.json()) as { error: { code: string; message: string } };
  expect(body.error.code).toBe("queue_full");
  expect(body.error.message).toContain("all 1 sequences are generating and 1 requests wait for one");
  expect((await holder.rest).trimEnd().endsWith("data: [DONE]")).toBe(true);
  const served = await waiting;
  expect(served.status).toBe(200);
  expect(((await served.json()) as { usage: { completion_tokens: number } }).usage.completion_tokens).toBe(4);
});

it("answers a stream that waited while a stage died 503 pipeline_broken with Retry-After, not a 200 holding an error", async () => {
  const holder = await holdSlot(5000);
  const queued = post({ prompt: "a dog", max_tokens: 8, stream: true });
  await untilQueued(1);
  cluster.stages[1]!.child.kill("SIGKILL");
  const answer = await queued;
  const text = await answer.text();
  expect(answer.status, text).toBe(503);
  expect(answer.headers.get("retry-after")).toBe("2");
  expect((JSON.parse(text) as { error: { code: string } }).error.code).toBe("pipeline_broken");
  // The stream that was generating had its head long before: it ends with an error event.
  expect(await holder.rest).toContain('"code":"pipeline_broken"');
});
