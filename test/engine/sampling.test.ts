/**
 * The sampler looks for the nucleus (top_p) among the heaviest tokens first instead of sorting the
 * whole vocabulary: it must choose exactly the tokens the plain definition chooses, seed for seed,
 * whatever the distribution — peaked, flat, tied, masked, or so wide that only the whole sort holds
 * the nucleus.
 */
import { describe, expect, it } from "vitest";
import { Sampler, type SamplingParams } from "../../src/engine/model/index.js";
import { normal, ReferenceSampler, seededLogits } from "../support/reference-sampler.js";

const logitsOf = (n: number, shape: (random: () => number, i: number) => number): Float32Array => seededLogits(n, shape, 11);

const distributions: Array<[string, Float32Array]> = [
  ["one token", logitsOf(1, () => 0.5)],
  ["two tokens, tied", logitsOf(2, () => 1)],
  ["peaked (one token far ahead)", logitsOf(1000, (r, i) => (i === 417 ? 12 : normal(1)(r)))],
  ["a language model's spread (σ 3) over 16 000 tokens", logitsOf(16_000, normal(3))],
  ["flat (uniform in ±5) over 12 000 tokens", logitsOf(12_000, (r) => (r() - 0.5) * 10)],
  ["ties: eight values over 5 000 tokens", logitsOf(5_000, (r) => Math.floor(r() * 8))],
  ["masked: most tokens −∞", logitsOf(3_000, (r, i) => (i % 7 === 0 ? normal(2)(r) : -Infinity))],
  ["wide: weights far below every floor", logitsOf(4_000, (r) => -60 * r())],
];

const settings: Array<Pick<SamplingParams, "temperature" | "topP">> = [
  { temperature: 0, topP: 1 },
  { temperature: 1, topP: 1 },
  { temperature: 0.7, topP: 1 },
  { temperature: 0.3, topP: 0.05 },
  { temperature: 0.8, topP: 0.5 },
  { temperature: 1, topP: 0.9 },
  { temperature: 1.7, topP: 0.95 },
  { temperature: 1, topP: 0.999999999999 },
];

describe("sampling", () => {
  for (const [name, logits] of distributions) {
    it(`chooses the plain definition's tokens: ${name}`, () => {
      for (const setting of settings) {
        for (const seed of [1, 0xdeadbeef]) {
          const params = { ...setting, seed, logprobs: seed === 1, topLogprobs: 0 };
          const sampler = new Sampler(params);
          const reference = new ReferenceSampler(params);
          const chosen = Array.from({ length: 8 }, () => sampler.sample(logits));
          const expected = Array.from({ length: 8 }, () => reference.choose(logits));
          expect(
            chosen.map((c) => c.token),
            `${JSON.stringify(params)}`,
          ).toEqual(expected);
          // The log probability only when asked for, and then the plain definition's, to the bit.
          const logprobs = chosen.map((c) => c.logprob);
          expect(logprobs, `${JSON.stringify(params)}`).toEqual(params.logprobs ? expected.map((token) => reference.logprobOf(logits, token)) : expected.map(() => NaN));
        }
      }
    });
  }

  it("draws from the nucleus only: a top_p that the heaviest token reaches alone always gives it", () => {
    const logits = logitsOf(20_000, (r, i) => (i === 9_999 ? 20 : normal(2)(r)));
    const sampler = new Sampler({ temperature: 1, topP: 0.5, seed: 5, logprobs: false, topLogprobs: 0 });
    expect(new Set(Array.from({ length: 50 }, () => sampler.sample(logits).token))).toEqual(new Set([9_999]));
  });

  it("spreads over the nucleus: a flat top half of the vocabulary at top_p 0.5 gives many tokens, all of that half", () => {
    const logits = logitsOf(10_000, (_, i) => (i < 5_000 ? 0 : -30));
    const sampler = new Sampler({ temperature: 1, topP: 0.5, seed: 9, logprobs: false, topLogprobs: 0 });
    const tokens = Array.from({ length: 200 }, () => sampler.sample(logits).token);
    // The nucleus: the first tokens of the tied top half (ties by index), about half of it.
    expect(Math.max(...tokens)).toBeLessThan(2_600);
    expect(new Set(tokens).size).toBeGreaterThan(150);
  });
});
