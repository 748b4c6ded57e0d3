/**
 * A long prompt on a real 2-stage pipeline goes in chunks of 512 tokens, and the steps of other
 * sequences run between them: a stream under way keeps getting tokens while the prompt is
 * processed, instead of none until it is done. Counted in tokens, not timed: the stream gets at
 * least one token per chunk, where a prompt in one step let through none. The chunked prompt's
 * answer is the single process's, token for token and log probability for log probability.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, expect, it } from "vitest";
import { type Cluster, killAll, postJson, requireBuild, startLongPromptCluster, startSingle } from "./support.js";

let dir: string;
let modelDir: string;
let cluster: Cluster;
const model = "tiny-llama";
const prompt = Array.from({ length: 6000 }, (_, i) => (i * 37 + 11) % 300);

beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-long-prompt-"));
  ({ cluster, modelDir } = await startLongPromptCluster(dir));
}, 60_000);
afterAll(async () => {
  await cluster?.stop();
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

it("a stream under way gets tokens while a long prompt is processed, one chunk at a time", async () => {
  const stream = await fetch(`${cluster.baseUrl}/v1/completions`, {
    method: "POST",
    body: JSON.stringify({ model, prompt: "the cat", max_tokens: 4000, temperature: 0, stream: true }),
  });
  expect(stream.status).toBe(200);
  const reader = stream.body!.getReader();
  await reader.read();
  let tokens = 0;
  let longDone = false;
  let duringLong = 0;
  const reading = (async () => {
    for (let chunk = await reader.read(); !chunk.done; chunk = await reader.read()) {
      const events = new TextDecoder()
        .decode(chunk.value)
        .split("\n")
        .filter((l) => l.startsWith("data: {"));
      tokens += events.length;
      if (!longDone) duringLong += events.length;
    }
  })();
  const before = tokens;
  const long = await postJson(`${cluster.baseUrl}/v1/completions`, { model, prompt, max_tokens: 1, temperature: 0 });
  longDone = true;
  expect(long.status).toBe(200);
  // 6000 tokens are 12 chunks: the stream's steps ran between them.
  expect(duringLong - before).toBeGreaterThanOrEqual(6);
  await reader.cancel();
  await reading.catch(() => undefined);
}, 120_000);

it("the chunked prompt's answer is the single process's, log probabilities included", async () => {
  const request = { model, prompt: prompt.slice(0, 1300), max_tokens: 4, temperature: 0, logprobs: 5 };
  const split = await postJson(`${cluster.baseUrl}/v1/completions`, request);
  const single = await startSingle(modelDir, ["--no-warmup", "--model-name", model, "--context-length", "8192"]);
  try {
    const whole = await postJson(`${single.baseUrl}/v1/completions`, request);
    expect(split.status).toBe(200);
    const choice = (answer: typeof split): unknown => (answer.json.choices as unknown[])[0];
    expect(choice(split)).toEqual(choice(whole));
  } finally {
    await single.stop();
  }
}, 120_000);
