/**
 * Split == single process: the same greedy tokens and the same log probabilities (top 20, which
 * come straight from the logits) for f16 and 4-bit models, 2 and 3 stages, default and explicit
 * layer ranges; a seeded sampled completion is reproduced too.
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { killAll, postJson, requireBuild, startCluster, startSingle } from "./support.js";

let dir: string;
beforeAll(async () => {
  requireBuild();
  dir = await mkdtemp(join(tmpdir(), "engine-split-"));
});
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

// A prompt long enough to exercise the batched prefill across boundaries.
const chat = {
  messages: [{ role: "user", content: "the quick brown fox jumps over the lazy dog, then writes a story" }],
  max_tokens: 12,
  temperature: 0,
  logprobs: true,
  top_logprobs: 20,
};
const sampled = { prompt: "once upon a time", max_tokens: 10, temperature: 0.9, top_p: 0.95, seed: 1234, logprobs: 5 };

async function transcript(baseUrl: string): Promise<unknown[]> {
  const a = await postJson(`${baseUrl}/v1/chat/completions`, chat);
  const b = await postJson(`${baseUrl}/v1/completions`, sampled);
  expect(a.status).toBe(200);
  expect(b.status).toBe(200);
  const ca = (a.json.choices as Array<Record<string, unknown>>)[0]!;
  const cb = (b.json.choices as Array<Record<string, unknown>>)[0]!;
  return [ca.message, ca.logprobs, ca.finish_reason, cb.text, cb.logprobs];
}

for (const variant of [
  { name: "f16", options: { dtype: "f16" as const, seed: 11 } },
  { name: "4-bit", options: { quantize: 4 as const, seed: 12 } },
]) {
  describe(`split == single (${variant.name})`, () => {
    let modelDir: string;
    let reference: unknown[];

    beforeAll(async () => {
      modelDir = join(dir, variant.name);
      await makeTestModel(modelDir, { layers: 6, hidden: 64, heads: 4, kvHeads: 2, vocab: 320, ...variant.options });
      const single = await startSingle(modelDir, ["--no-warmup"]);
      reference = await transcript(single.baseUrl);
      // Determinism: the same request twice gives the same answer.
      expect(await transcript(single.baseUrl)).toEqual(reference);
      await single.stop();
      const logprobs = reference[1] as { content: Array<{ top_logprobs: unknown[] }> };
      expect(logprobs.content).toHaveLength(12);
      expect(logprobs.content[0]!.top_logprobs).toHaveLength(20);
    });

    for (const stages of [
      2,
      3,
      [
        [0, 1],
        [1, 6],
      ],
      [
        [0, 4],
        [4, 5],
        [5, 6],
      ],
    ] as Array<number | Array<[number, number]>>) {
      it(`${typeof stages === "number" ? `${stages} stages, default split` : `explicit ranges ${JSON.stringify(stages)}`}`, async () => {
        const cluster = await startCluster(modelDir, { stages, dir });
        try {
          expect(await transcript(cluster.baseUrl)).toEqual(reference);
        } finally {
          await cluster.stop();
        }
      });
    }
  });
}
