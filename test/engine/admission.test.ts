/**
 * Admission on a 2-stage pipeline whose coordinator is told `--max-sequences 1` and
 * `--context-length 256` (what the launch passes from the definition's max_sequences and
 * context_length): a request holds at most 256 tokens; concurrent requests are generated one at a time,
 * each waiting its turn, every stage holding at most one sequence; a request whose client leaves
 * while it waits is never computed.
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
/** What the launch passes from the definition's context_length: far below the model's 8192. */
const contextLength = 256;

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-admission-"));
  const modelDir = join(dir, model);
  await makeTestModel(modelDir, { layers: 4, hidden: 64, vocab: 320, seed: 3 });
  const tokenFile = join(dir, "token");
  await writeFile(tokenFile, "admission-token\n");
  cluster = await startCluster(modelDir, {
    stages: 2,
    dir,
    tokenFile,
    coordinatorArgs: ["--model-name", model, "--max-sequences", "1", "--context-length", String(contextLength)],
  });
});
afterAll(async () => {
  await cluster?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

type Stage = { rowsSentDownstream: number; sequences: number };
const stats = async (): Promise<Stage[]> => ((await (await fetch(`${cluster.baseUrl}/debug/stats`)).json()) as { stages: Stage[] }).stages;

async function complete(body: object, signal?: AbortSignal): Promise<{ prompt_tokens: number; completion_tokens: number }> {
  const r = await fetch(`${cluster.baseUrl}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ model, temperature: 0, ...body }),
    ...(signal === undefined ? {} : { signal }),
  });
  const json = (await r.json()) as { usage: { prompt_tokens: number; completion_tokens: number } };
  expect(r.status, JSON.stringify(json)).toBe(200);
  return json.usage;
}

it("generates one sequence at a time; the others wait their turn, and one abandoned while waiting is never computed", async () => {
  const before = (await stats())[0]!.rowsSentDownstream;
  let most = 0;
  let polling = true;
  const poll = (async () => {
    while (polling) {
      for (const s of await stats()) most = Math.max(most, s.sequences);
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  // The first streams: once its first token has arrived it holds the slot for many more.
  const firstResponse = await fetch(`${cluster.baseUrl}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ model, temperature: 0, prompt: "the cat", max_tokens: 200, stream: true, stream_options: { include_usage: true } }),
  });
  const reader = firstResponse.body!.getReader();
  let streamed = new TextDecoder().decode((await reader.read()).value);
  const first = (async () => {
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) streamed += new TextDecoder().decode(chunk.value);
    const usage = /"usage":(\{[^}]*\})/.exec(streamed)?.[1];
    return JSON.parse(usage ?? "null") as { prompt_tokens: number; completion_tokens: number };
  })();
  const second = complete({ prompt: "a dog", max_tokens: 16 });
  // Waits behind the two above; its client gives up long before its turn.
  const leaving = new AbortController();
  const abandoned = complete({ prompt: "never computed, these many words, many tokens", max_tokens: 16 }, leaving.signal).catch((error: Error) => error.name);
  setTimeout(() => leaving.abort(), 20);
  const usages = await Promise.all([first, second]);
  expect(await abandoned).toBe("AbortError");
  polling = false;
  await poll;
  expect(most).toBe(1);
  // Stage 0 sends prompt + completion − 1 rows per request: the abandoned one sent none.
  const rows = (await stats())[0]!.rowsSentDownstream - before;
  expect(rows).toBe(usages.reduce((sum, u) => sum + u.prompt_tokens + u.completion_tokens - 1, 0));
});

it("admits a request only within --context-length: a longer prompt is refused, a completion stops where prompt and completion fill it", async () => {
  const refused = await fetch(`${cluster.baseUrl}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ model, prompt: Array.from({ length: 300 }, (_, i) => 5 + i), max_tokens: 1 }),
  });
  expect(refused.status).toBe(400);
  expect(((await refused.json()) as { error: { message: string; code: string } }).error).toMatchObject({
    code: "context_length_exceeded",
    message: `The prompt (300 tokens) leaves no room in the context of ${contextLength} tokens`,
  });
  // 250 prompt tokens leave 6: max_tokens 100 is cut to them, the KV caches never hold more than
  // planned. (This prompt's greedy completion runs 20 tokens and more without an end of text.)
  const r = await fetch(`${cluster.baseUrl}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ model, temperature: 0, prompt: Array.from({ length: 250 }, (_, i) => 5 + ((i * 11) % 310)), max_tokens: 100 }),
  });
  const json = (await r.json()) as { choices: Array<{ finish_reason: string }>; usage: object };
  expect(json.usage).toEqual({ prompt_tokens: 250, completion_tokens: contextLength - 250, total_tokens: contextLength });
  expect(json.choices[0]?.finish_reason).toBe("length");
});

it("/health counts the tokens generated since start, and the count grows while a request waits behind a held slot", async () => {
  const generated = async (): Promise<number> => ((await (await fetch(`${cluster.baseUrl}/health`)).json()) as { generatedTokens: number }).generatedTokens;
  const start = await generated();
  // This prompt's greedy completion runs past 20 tokens without an end of text: exactly 20 sampled.
  const prompt = Array.from({ length: 200 }, (_, i) => 5 + ((i * 11) % 310));
  const usage = await complete({ prompt, max_tokens: 20 });
  expect(usage.completion_tokens).toBe(20);
  expect((await generated()) - start).toBe(20);
  // One request holds the only slot for a while; a second waits. The count keeps growing meanwhile:
  // what a generation watchdog reads to tell a busy coordinator from a hung one.
  const long = complete({ prompt: [5, 6, 7], max_tokens: 240 });
  const waiting = complete({ prompt: [5, 6, 8], max_tokens: 1 });
  const counts: number[] = [];
  let finished = false;
  void waiting.then(() => (finished = true));
  while (!finished && counts.length < 200) {
    counts.push(await generated());
    await new Promise((r) => setTimeout(r, 5));
  }
  await Promise.all([long, waiting]);
  expect(counts.length).toBeGreaterThan(1);
  expect(counts.at(-1)!).toBeGreaterThan(counts[0]!);
});
