import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { CompletionText, findStop, IncrementalText, sendableLength, TextCodec } from "../../src/engine/coordinator/index.js";
import { createRng } from "../../src/engine/model/index.js";
import { byteLevelTokenizerJson, byteToUnicode, makeTestModel, specialToken, type TestModelOptions } from "../../src/planner/index.js";

// Pieces of text whose tokens exercise what a window must get right: characters split across
// byte tokens, spaces the clean-up of tokenization spaces removes, newlines and runs of spaces.
const pieces = ["the", " cat", " sat", " .", " ,", " ?", " !", " n't", " 's", " 're", " 've", " 'm", "é", " €", "😀", "漢字", "\n", " ", "  ", "x", " '", "don", "'t"];

/**
 * Token ids of random text, with some tokens of any kind (stray bytes, special tokens) mixed in,
 * and now and then a run of up to 12 special tokens (which decode to nothing).
 */
function randomIds(codec: TextCodec, vocab: number, seed: number, length: number, specials: number[]): number[] {
  const next = createRng(seed);
  const ids: number[] = [];
  while (ids.length < length) {
    const roll = next();
    if (roll < 0.1) ids.push(Math.floor(next() * vocab));
    else if (roll < 0.15) for (let n = 1 + Math.floor(next() * 12); n > 0; n--) ids.push(specials[Math.floor(next() * specials.length)] as number);
    else ids.push(...codec.encode(pieces[Math.floor(next() * pieces.length)] as string));
  }
  return ids.slice(0, length);
}

/** The ids decode() leaves out, among the first `vocab`. */
function specialIds(codec: TextCodec, vocab: number): number[] {
  const ids = Array.from({ length: vocab }, (_, id) => id).filter((id) => codec.isSkipped(id));
  if (ids.length === 0) throw new Error("the tokenizer has no special tokens to test with");
  return ids;
}

/**
 * Feeds `ids` one at a time and checks that the text is, after every token (or every `every`
 * tokens), exactly what decoding all of them gives, with and without the clean-up of
 * tokenization spaces. Returns the most token ids one window decode was given.
 */
function checkAgainstFullDecode(codec: TextCodec, ids: number[], label: string, every = 1): number {
  let widest = 0;
  const raw = new IncrementalText(
    (window) => {
      widest = Math.max(widest, window.length);
      return codec.decodeRaw(window);
    },
    (id) => codec.isSkipped(id),
  );
  const text = new CompletionText(raw, codec);
  ids.forEach((id, i) => {
    const { text: clean } = text.push(id);
    if ((i + 1) % every !== 0 && i + 1 !== ids.length) return;
    const upTo = ids.slice(0, i + 1);
    expect(raw.text, `${label}, after ${i + 1} tokens`).toBe(codec.decodeRaw(upTo));
    expect(clean, `${label}, after ${i + 1} tokens`).toBe(codec.decode(upTo));
  });
  return widest;
}

describe("incremental text: the same text as decoding the whole completion, a window at a time", () => {
  const dirs: string[] = [];
  const codecs = new Map<string, { codec: TextCodec; vocab: number }>();

  beforeAll(async () => {
    for (const family of ["llama", "qwen2"] as Array<NonNullable<TestModelOptions["family"]>>) {
      const dir = await mkdtemp(join(tmpdir(), "shardctl-incremental-"));
      dirs.push(dir);
      await makeTestModel(dir, { family, layers: 1, hidden: 32, heads: 2, kvHeads: 1, vocab: 320 });
      codecs.set(family, { codec: new TextCodec(dir), vocab: 320 });
    }
    // A byte-level tokenizer whose tokens span characters, as real byte-level vocabularies' do
    // (CJK text): "€" is e2 82 ac, and one token is ac e2 82, so a run of "€" has every token
    // boundary inside a character.
    {
      const dir = await mkdtemp(join(tmpdir(), "shardctl-incremental-cross-"));
      dirs.push(dir);
      const byteChar = byteToUnicode();
      const vocab: Record<string, number> = {};
      for (let b = 0; b < 256; b++) vocab[byteChar[b] as string] = b;
      vocab[[0xac, 0xe2, 0x82].map((b) => byteChar[b]).join("")] = 256;
      const tokenizer = byteLevelTokenizerJson(vocab, [], [specialToken(257, "<|end|>")]);
      await writeFile(join(dir, "tokenizer.json"), JSON.stringify(tokenizer));
      await writeFile(join(dir, "tokenizer_config.json"), JSON.stringify({ clean_up_tokenization_spaces: false }));
      codecs.set("spanning", { codec: new TextCodec(dir), vocab: 258 });
    }
    // A SentencePiece-style tokenizer (Llama 2, Mistral): "▁" for spaces, byte fallback for
    // characters outside the vocabulary, and a decoder that drops the text's leading space.
    const dir = await mkdtemp(join(tmpdir(), "shardctl-incremental-sp-"));
    dirs.push(dir);
    const vocab: Record<string, number> = { "<unk>": 0, "<s>": 1, "</s>": 2 };
    for (let b = 0; b < 256; b++) vocab[`<0x${b.toString(16).toUpperCase().padStart(2, "0")}>`] = 3 + b;
    for (const piece of [
      "▁",
      "▁\ufffd",
      "▁the",
      "▁cat",
      "▁sat",
      "t",
      "h",
      "e",
      "c",
      "a",
      "s",
      "x",
      "d",
      "o",
      "n",
      "'",
      ".",
      ",",
      "?",
      "!",
      "▁.",
      "▁,",
      "▁n",
      "'t",
      "▁'",
      "é",
      "▁don",
    ])
      vocab[piece] = Object.keys(vocab).length;
    const tokenizer = {
      version: "1.0",
      truncation: null,
      padding: null,
      added_tokens: ["<unk>", "<s>", "</s>"].map((content, id) => specialToken(id, content)),
      normalizer: {
        type: "Sequence",
        normalizers: [
          { type: "Prepend", prepend: "▁" },
          { type: "Replace", pattern: { String: " " }, content: "▁" },
        ],
      },
      pre_tokenizer: null,
      post_processor: null,
      decoder: {
        type: "Sequence",
        decoders: [
          { type: "Replace", pattern: { String: "▁" }, content: " " },
          { type: "ByteFallback" },
          { type: "Fuse" },
          { type: "Strip", content: " ", start: 1, stop: 0 },
        ],
      },
      model: {
        type: "BPE",
        dropout: null,
        unk_token: "<unk>",
        continuing_subword_prefix: null,
        end_of_word_suffix: null,
        fuse_unk: true,
        byte_fallback: true,
        ignore_merges: false,
        vocab,
        merges: [],
      },
    };
    await writeFile(join(dir, "tokenizer.json"), JSON.stringify(tokenizer));
    await writeFile(join(dir, "tokenizer_config.json"), JSON.stringify({ bos_token: "<s>", eos_token: "</s>", clean_up_tokenization_spaces: false }));
    codecs.set("sentencepiece", { codec: new TextCodec(dir), vocab: Object.keys(vocab).length });
  });

  afterAll(async () => {
    for (const dir of dirs) await rm(dir, { recursive: true, force: true });
  });

  for (const kind of ["llama", "qwen2", "sentencepiece"]) {
    it(`${kind} tokenizer: 300 random completions of up to 60 tokens`, () => {
      const { codec, vocab } = codecs.get(kind)!;
      for (let seed = 1; seed <= 300; seed++) {
        const ids = randomIds(codec, vocab, seed, 1 + (seed % 60), specialIds(codec, vocab));
        checkAgainstFullDecode(codec, ids, `${kind}, seed ${seed}`);
      }
    });
  }

  for (const kind of ["llama", "qwen2", "sentencepiece", "spanning"]) {
    it(`${kind} tokenizer: a stream sends only settled text, which the final text begins with`, () => {
      const { codec, vocab } = codecs.get(kind)!;
      for (let seed = 1000; seed < 1300; seed++) {
        const ids = randomIds(codec, vocab, seed, 1 + (seed % 60), specialIds(codec, vocab));
        const text = codec.completionText();
        let sent = "";
        for (const [i, id] of ids.entries()) {
          const { text: clean, settled } = text.push(id);
          if (!clean.startsWith(sent)) throw new Error(`${kind}, seed ${seed}, token ${i + 1}: sent ${JSON.stringify(sent)}, now the text is ${JSON.stringify(clean)}`);
          sent += clean.slice(sent.length, Math.max(sent.length, settled));
        }
        expect(codec.decode(ids).startsWith(sent), `${kind}, seed ${seed}`).toBe(true);
      }
    });
  }

  it("a stream with stop strings sends only text the final text begins with (the generation loop's rules)", () => {
    const { codec } = codecs.get("llama")!;
    // Pieces (each encoded alone, so tokens split where they split) and a stop string that the
    // clean-up of spaces forms across them: sent text must never need taking back.
    const cases: Array<[string[], string]> = [
      [["I", " do", " n", "'t", " know"], "don't"],
      [["the", " end", " ", ".", " more"], "end."],
      [["Hi", " there", " ", "!"], "there!"],
      [["a", " b", " ,", " c"], "b,"],
      [["it", " '", "s"], "it's"],
      [["x", " '", " ,", " y"], "',"],
      [["say", " é", "é", " ok"], "éé"],
    ];
    const next = createRng(99);
    for (let seed = 0; seed < 300; seed++) {
      const words = Array.from({ length: 3 + Math.floor(next() * 20) }, () => pieces[Math.floor(next() * pieces.length)] as string);
      const stop =
        words
          .slice(1 + Math.floor(next() * 2), 3 + Math.floor(next() * 2))
          .join("")
          .trim() || "x";
      cases.push([words, stop]);
    }
    for (const [words, stop] of cases) {
      const ids = words.flatMap((w) => codec.encode(w));
      const label = `${JSON.stringify(words)} stop ${JSON.stringify(stop)}`;
      const text = codec.completionText();
      let sent = "";
      let clean = "";
      let final: string | undefined;
      for (const id of ids) {
        const now = text.push(id);
        clean = now.text;
        const at = findStop(clean, [stop], Math.max(0, sent.length - stop.length));
        if (at >= 0) {
          final = clean.slice(0, at);
          break;
        }
        sent += clean.slice(sent.length, Math.max(sent.length, sendableLength(clean, now.settled, [stop])));
        expect(sent.includes(stop), label).toBe(false);
      }
      final ??= clean;
      expect(final.startsWith(sent), `${label}: sent ${JSON.stringify(sent)}, final ${JSON.stringify(final)}`).toBe(true);
    }
  });

  it("runs of literal U+FFFD characters and of ids past the tokenizer's vocabulary: exact, with bounded windows", () => {
    for (const kind of ["llama", "qwen2", "sentencepiece"]) {
      const { codec, vocab } = codecs.get(kind)!;
      for (const k of [5, 10, 11, 20, 40]) {
        const ids = codec.encode(`Encoding error: ${"\ufffd".repeat(k)} done € ok`);
        expect(checkAgainstFullDecode(codec, ids, `${kind}, ${k} × U+FFFD`), kind).toBeLessThanOrEqual(34);
      }
      for (const k of [3, 28, 29, 57, 58, 100]) {
        // Ids a model's embedding may have beyond the tokenizer (padded vocabularies) decode to nothing.
        const ids = [...codec.encode("the €"), ...Array.from({ length: k }, (_, i) => vocab + 50 + i), ...codec.encode(" é ok")];
        // They never enter a window (the decode skips them), so windows stay short.
        expect(checkAgainstFullDecode(codec, ids, `${kind}, ${k} ids past the vocabulary`), kind).toBeLessThanOrEqual(12);
      }
    }
  });

  it("text whose every token boundary cuts a character, and runs of word-initial U+FFFD: exact, with bounded windows", () => {
    const spanning = codecs.get("spanning")!.codec;
    // e2 82, then (ac e2 82) × n, then ac: n + 1 "€", each token but the last ending inside one.
    for (const n of [10, 31, 32, 33, 70]) {
      const ids = [0xe2, 0x82, ...Array.from({ length: n }, () => 256), 0xac];
      expect(spanning.decode(ids)).toBe("€".repeat(n + 1));
      expect(checkAgainstFullDecode(spanning, ids, `${n + 1} × € across tokens`)).toBeLessThanOrEqual(34);
    }
    const sentencepiece = codecs.get("sentencepiece")!.codec;
    for (const n of [10, 32, 33, 70]) {
      const ids = sentencepiece.encode(`the${" \ufffd".repeat(n)} cat`);
      expect(checkAgainstFullDecode(sentencepiece, ids, `${n} × "▁\ufffd"`)).toBeLessThanOrEqual(34);
    }
  });

  it("decodes a bounded window per token, however long the completion", () => {
    const { codec, vocab } = codecs.get("llama")!;
    const ids = randomIds(codec, vocab, 7, 3000, specialIds(codec, vocab));
    // The window: up to 2 × 4 tokens of context, the new token, and the tokens of one split
    // character or clean-up pattern still held (a few).
    expect(checkAgainstFullDecode(codec, ids, "3000 tokens", 500)).toBeLessThanOrEqual(16);
  });

  // Regression (found in review): the clean-up's replacements chain — " ' " becoming "'" makes
  // "  ' re" into " 're", then "'re" — and the text was cut after "  ' r", so the streamed and final
  // text kept "they 're" where decode() gives "they're".
  it("clean-up patterns that one replacement makes for the next are never cut: exact on short pieces of spaces, quotes and letters", () => {
    const { codec } = codecs.get("llama")!;
    const alphabet = [" ", "  ", "'", " '", "r", "e", "v", "s", "m", "n", "t", ".", "x", "they", " here"];
    const cases = [["they", "  '", " ", "r", "e", " here"]];
    const next = createRng(2024);
    for (let i = 0; i < 3000; i++) cases.push(Array.from({ length: 2 + Math.floor(next() * 10) }, () => alphabet[Math.floor(next() * alphabet.length)]!));
    for (const pieces of cases) {
      const ids = pieces.flatMap((p) => codec.encode(p));
      const text = codec.completionText();
      let last = "";
      for (const id of ids) last = text.push(id).text;
      expect(last, JSON.stringify(pieces)).toBe(codec.decode(ids));
    }
  });

  // Regression: the clean-up of tokenization spaces ran over the whole completion at every token,
  // a cost per token in proportion to the completion's length.
  it("cleans up a bounded stretch of text per token, however long the completion", () => {
    const { codec, vocab } = codecs.get("llama")!;
    const ids = randomIds(codec, vocab, 11, 3000, specialIds(codec, vocab));
    let longest = 0;
    const text = new CompletionText(codec.incrementalText(), {
      cleanUp: (raw) => {
        longest = Math.max(longest, raw.length);
        return codec.cleanUp(raw);
      },
      cleanCut: (raw, end) => codec.cleanCut(raw, end),
    });
    let last = "";
    for (const id of ids) last = text.push(id).text;
    expect(last).toBe(codec.decode(ids));
    expect(last.length).toBeGreaterThan(2000);
    // The open window's text and the spaces held at a cut: a few dozen characters.
    expect(longest).toBeLessThan(200);
  });

  it("a model emitting bytes that never form a character: U+FFFD, with a bounded window", () => {
    const { codec } = codecs.get("llama")!;
    // "€" is the byte tokens e2 82 ac: e2 followed by e2 never completes, a lone 82 never starts.
    const [lead, continuation] = codec.encode("€") as [number, number];
    for (const ids of [
      Array.from({ length: 500 }, () => lead),
      Array.from({ length: 500 }, () => continuation),
      Array.from({ length: 500 }, (_, i) => (i % 7 === 6 ? lead : continuation)),
    ]) {
      expect(checkAgainstFullDecode(codec, ids, "garbage", 50)).toBeLessThanOrEqual(34);
    }
  });

  it("a stream of bytes that never form a character still streams, one character behind", () => {
    const { codec } = codecs.get("llama")!;
    const [lead, continuation] = codec.encode("€") as [number, number];
    for (const ids of [
      Array.from({ length: 200 }, () => continuation),
      Array.from({ length: 200 }, (_, i) => (i % 7 === 6 ? lead : continuation)),
      [...codec.encode("hi"), ...Array.from({ length: 60 }, () => lead), ...codec.encode("€ ok")],
    ]) {
      const text = codec.completionText();
      let sent = "";
      for (const [i, id] of ids.entries()) {
        const { text: clean, settled } = text.push(id);
        expect(clean.startsWith(sent), `token ${i + 1}`).toBe(true);
        sent += clean.slice(sent.length, Math.max(sent.length, settled));
        // Held back: only the last U+FFFD, which the next byte may complete into a character.
        expect(clean.length - sent.length, `token ${i + 1} of ${JSON.stringify(clean.slice(-8))}`).toBeLessThanOrEqual(1);
      }
    }
  });

  it("a character that completes after a long run of such bytes: the text stays well-formed and goes on", () => {
    const { codec } = codecs.get("llama")!;
    const [lead] = codec.encode("€") as [number];
    for (const character of ["😀", "€"]) {
      const ids = [...codec.encode("hi"), ...Array.from({ length: 29 + (character === "😀" ? 0 : 1) }, () => lead), ...codec.encode(`${character} ok`)];
      const text = codec.incrementalText();
      // A lone UTF-16 surrogate (half of a character split by the window) matches \p{Cs}.
      for (const id of ids) expect(text.push(id), character).not.toMatch(/\p{Cs}/u);
      expect(text.text.startsWith("hi\ufffd"), character).toBe(true);
      expect(text.text.endsWith(" ok"), character).toBe(true);
    }
  });
});
