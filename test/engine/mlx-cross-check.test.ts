/**
 * shard-engine against mlx-lm, MLX's own implementation, on the same Llama test model (the
 * make-test-model default family): single process each, the same chat, greedy decoding, for an f16
 * model and an MLX 4-bit model. Both must build the same prompt and choose the same tokens as
 * mlx-lm does natively, and give every top-5 candidate the same log-probability within 2e-3 as
 * mlx-lm running the same weights with float32 parameters. Natively MLX rounds every activation of
 * an f16 model to f16, which moves log-probabilities by up to ~6e-3 (f16) and ~1.2e-2 (4-bit, f16
 * scales) on these models; shard-engine accumulates in float32, and agrees with the float32 run.
 * mlx-lm runs in the project's .venv-mlx (installed on first use, about 40 s).
 */
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { makeTestModel, type TestModelOptions } from "../../src/planner/test-model/index.js";
import { mlxGreedy } from "../support/mlx-lm.js";
import { ensureMlxVenv } from "../support/mlx-venv.js";
import { killAll, postJson, requireBuild, startSingle } from "./support.js";

const tolerance = 2e-3;
const maxTokens = 12;
const messages = [{ role: "user", content: "the quick brown fox jumps over the lazy dog, then writes a story" }];

let dir: string;
beforeAll(async () => {
  requireBuild();
  await ensureMlxVenv();
  dir = await mkdtemp(join(tmpdir(), "engine-mlx-cross-"));
}, 600_000);
afterAll(async () => {
  await killAll();
  await rm(dir, { recursive: true, force: true });
});

interface EngineEntry {
  token: string;
  logprob: number;
  top_logprobs: Array<{ token: string; logprob: number }>;
}

const variants: Array<{ name: string; options: TestModelOptions }> = [
  { name: "f16", options: { dtype: "f16", seed: 21 } },
  { name: "4-bit", options: { quantize: 4, seed: 22 } },
];

describe.each(variants)("shard-engine == mlx-lm ($name)", ({ name, options }) => {
  it("same prompt, same greedy tokens, top-5 log-probabilities within 2e-3", async () => {
    const modelDir = join(dir, name);
    await makeTestModel(modelDir, { layers: 4, ...options });
    const native = await mlxGreedy(modelDir, messages, maxTokens);
    const reference = await mlxGreedy(modelDir, messages, maxTokens, { float32: true });
    expect(reference.tokens.map((t) => t.id)).toEqual(native.tokens.map((t) => t.id));

    const single = await startSingle(modelDir, ["--no-warmup"]);
    const { status, json } = await postJson(`${single.baseUrl}/v1/chat/completions`, {
      messages,
      max_tokens: maxTokens,
      temperature: 0,
      logprobs: true,
      top_logprobs: 5,
    });
    await single.stop();
    expect(status).toBe(200);
    const usage = json.usage as { prompt_tokens: number };
    expect(usage.prompt_tokens).toBe(reference.promptIds.length);
    const content = (json.choices as Array<{ logprobs: { content: EngineEntry[] } }>)[0]!.logprobs.content;

    // shard-engine names tokens by their decoded text, so the comparison goes by text: an id whose
    // text another candidate shares (a lone UTF-8 continuation byte decodes to U+FFFD) is matched by
    // text and log-probability together.
    expect(content.map((t) => t.token)).toEqual(reference.tokens.map((t) => t.text));
    for (const [step, entry] of content.entries()) {
      const ref = reference.tokens[step]!;
      expect(Math.abs(entry.logprob - ref.logprob), `step ${step}: chosen token`).toBeLessThanOrEqual(tolerance);
      expect(entry.top_logprobs).toHaveLength(5);
      for (const [rank, candidate] of entry.top_logprobs.entries()) {
        const match = ref.top.find((r) => r.text === candidate.token && Math.abs(r.logprob - candidate.logprob) <= tolerance);
        const nearest = ref.top.filter((r) => r.text === candidate.token).map((r) => r.logprob);
        expect(match, `step ${step}, rank ${rank}: ${JSON.stringify(candidate)} vs mlx-lm ${JSON.stringify(nearest)}`).toBeDefined();
      }
    }
  }, 240_000);
});
