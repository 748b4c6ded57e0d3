/**
 * What choosing one token costs on a vocabulary the size of Llama 3's (128 256 tokens): the
 * engine's sampler against the plain definition (every token's weight, the whole vocabulary sorted
 * for top_p; test/support/reference-sampler.ts), on the same logits, the chosen tokens checked equal.
 */
import { Sampler, type SamplingParams } from "../src/engine/model/index.js";
import { normal, ReferenceSampler, seededLogits } from "../test/support/reference-sampler.js";

const vocab = 128_256;
/** Tokens chosen per figure. */
const draws = 24;

const round = (x: number, d: number): number => Math.round(x * 10 ** d) / 10 ** d;

const logitsOf = (shape: (random: () => number) => number): Float32Array => seededLogits(vocab, shape, 17);

export function samplingCost(): object {
  const distributions = {
    // A wide, smooth spread, as a model with random weights makes: a large nucleus.
    normalSigma3: logitsOf(normal(3)),
    // Flat, with one token in 97 raised by 8: a small group holds most of the mass.
    flatWithRaisedTokens: logitsOf((r) => (r() - 0.5) * 10 + (r() < 1 / 97 ? 8 : 0)),
  };
  const settings: Record<string, Pick<SamplingParams, "temperature" | "topP">> = {
    greedy: { temperature: 0, topP: 1 },
    temperature08: { temperature: 0.8, topP: 1 },
    temperature08TopP09: { temperature: 0.8, topP: 0.9 },
  };
  const figures: Record<string, object> = {};
  for (const [name, logits] of Object.entries(distributions)) {
    const row: Record<string, object> = {};
    for (const [label, setting] of Object.entries(settings)) {
      const params = { ...setting, seed: 3, logprobs: false, topLogprobs: 0 };
      // A few untimed choices of each first, on samplers of their own: both compiled before timing.
      const warmEngine = new Sampler(params);
      const warmPlain = new ReferenceSampler(params);
      for (let i = 0; i < 3; i++) {
        warmEngine.sample(logits);
        warmPlain.choose(logits);
      }
      const engine = new Sampler(params);
      const plain = new ReferenceSampler(params);
      const timeMs = (choose: () => number): { ms: number; tokens: number[] } => {
        const tokens: number[] = [];
        const start = performance.now();
        for (let i = 0; i < draws; i++) tokens.push(choose());
        return { ms: (performance.now() - start) / draws, tokens };
      };
      const a = timeMs(() => engine.sample(logits).token);
      const b = timeMs(() => plain.choose(logits));
      if (a.tokens.join() !== b.tokens.join()) throw new Error(`sampling ${name} ${label}: the engine chose other tokens than the plain definition`);
      row[label] = { engineMs: round(a.ms, 2), plainMs: round(b.ms, 2), plainOverEngine: round(b.ms / a.ms, 1) };
    }
    figures[name] = row;
  }
  return {
    vocab,
    ...figures,
    method: `ms per token over ${draws} tokens each, the engine's Sampler and the plain definition, neither asked for log probabilities, on the same logits, one after the other after 3 untimed choices each; the chosen tokens are checked equal`,
  };
}
