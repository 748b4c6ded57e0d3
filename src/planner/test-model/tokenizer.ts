/**
 * A real byte-level BPE tokenizer (the GPT-2/Llama-3/Qwen2 scheme) sized to the test model's
 * vocabulary: 256 byte tokens, a few merges of common English pairs, the family's special tokens, and
 * reserved special tokens filling the rest of the vocabulary.
 */

/** Model families the test model writer knows. */
export type TestModelFamily = "llama" | "qwen2";

/** Special tokens, in id order after the byte and merge tokens (Llama 3). */
export const specialTokens = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"] as const;

/** Qwen2's special tokens, in id order after the byte and merge tokens. */
export const qwen2SpecialTokens = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] as const;

/** Llama-3's chat template. */
export const chatTemplate =
  "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

/** Qwen2's ChatML template (without Qwen's default system prompt: the test model has no identity). */
export const qwen2ChatTemplate =
  "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Candidate merges, most useful first; as many are used as the vocabulary leaves room for.
const mergeCandidates: Array<[string, string]> = [
  ["Ġ", "t"],
  ["h", "e"],
  ["i", "n"],
  ["e", "r"],
  ["a", "n"],
  ["Ġ", "a"],
  ["o", "n"],
  ["r", "e"],
  ["Ġt", "he"],
  ["e", "n"],
  ["o", "r"],
  ["Ġ", "s"],
  ["e", "s"],
  ["Ġ", "w"],
  ["a", "t"],
  ["Ġ", "o"],
  ["i", "s"],
  ["Ġ", "c"],
  ["e", "d"],
  ["i", "t"],
  ["a", "r"],
  ["Ġ", "b"],
  ["Ġ", "h"],
  ["a", "l"],
];

/** GPT-2's reversible map from bytes to printable unicode characters. */
export function byteToUnicode(): string[] {
  const printable: number[] = [];
  for (let b = 0x21; b <= 0x7e; b++) printable.push(b);
  for (let b = 0xa1; b <= 0xac; b++) printable.push(b);
  for (let b = 0xae; b <= 0xff; b++) printable.push(b);
  const table: string[] = new Array<string>(256);
  let extra = 0;
  for (let b = 0; b < 256; b++) {
    table[b] = String.fromCodePoint(printable.includes(b) ? b : 256 + extra++);
  }
  return table;
}

/** tokenizer.json's entry for special token `content` with id `id`. */
export function specialToken(
  id: number,
  content: string,
): { id: number; content: string; single_word: false; lstrip: false; rstrip: false; normalized: false; special: true } {
  return { id, content, single_word: false, lstrip: false, rstrip: false, normalized: false, special: true };
}

/**
 * tokenizer.json of a byte-level BPE tokenizer (GPT-2's scheme: tokens are strings of
 * byteToUnicode characters) with this vocabulary, these merges and these added tokens.
 */
export function byteLevelTokenizerJson(vocab: Record<string, number>, merges: string[], addedTokens: object[]): object {
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  return {
    version: "1.0",
    truncation: null,
    padding: null,
    added_tokens: addedTokens,
    normalizer: null,
    pre_tokenizer: byteLevel,
    post_processor: null,
    decoder: byteLevel,
    model: {
      type: "BPE",
      dropout: null,
      unk_token: null,
      continuing_subword_prefix: null,
      end_of_word_suffix: null,
      fuse_unk: false,
      byte_fallback: false,
      ignore_merges: false,
      vocab,
      merges,
    },
  };
}

export interface TokenizerFiles {
  tokenizerJson: object;
  tokenizerConfig: object;
  bosTokenId: number;
  eosTokenIds: number[];
}

/** The smallest vocabulary a family's tokenizer fits in: the 256 bytes and its special tokens. */
export function minimumVocab(family: TestModelFamily): number {
  return 256 + (family === "qwen2" ? qwen2SpecialTokens.length : specialTokens.length);
}

/**
 * Build tokenizer.json and tokenizer_config.json for a vocabulary of `vocabSize` ids (at least
 * minimumVocab: 261 for Llama, 259 for Qwen2).
 */
export function buildTokenizer(vocabSize: number, family: TestModelFamily = "llama"): TokenizerFiles {
  const specials: readonly string[] = family === "qwen2" ? qwen2SpecialTokens : specialTokens;
  const minimum = minimumVocab(family);
  if (vocabSize < minimum) throw new RangeError(`vocab must be at least ${minimum}, got ${vocabSize}`);
  const vocab: Record<string, number> = {};
  for (const ch of byteToUnicode()) vocab[ch] = Object.keys(vocab).length;
  const merges: string[] = [];
  for (const [left, right] of mergeCandidates) {
    if (Object.keys(vocab).length >= vocabSize - specials.length) break;
    vocab[left + right] = Object.keys(vocab).length;
    merges.push(`${left} ${right}`);
  }
  const firstSpecial = Object.keys(vocab).length;
  const added: string[] = [...specials];
  const reserved = family === "qwen2" ? "<|extra_" : "<|reserved_special_token_";
  for (let i = firstSpecial + specials.length; i < vocabSize; i++) added.push(`${reserved}${i - firstSpecial - specials.length}|>`);
  const addedTokens = added.map((content, i) => specialToken(firstSpecial + i, content));
  const tokenizerJson = byteLevelTokenizerJson(vocab, merges, addedTokens);
  const addedTokensDecoder = Object.fromEntries(addedTokens.map(({ id, ...token }) => [String(id), token]));
  if (family === "qwen2") {
    // Qwen2 has no BOS token; <|endoftext|> pads and ends raw text, <|im_end|> ends a chat turn.
    const endOfText = firstSpecial;
    const imEnd = firstSpecial + 2;
    const tokenizerConfig = {
      tokenizer_class: "PreTrainedTokenizerFast",
      bos_token: null,
      eos_token: "<|im_end|>",
      pad_token: "<|endoftext|>",
      clean_up_tokenization_spaces: false,
      model_max_length: 32768,
      chat_template: qwen2ChatTemplate,
      added_tokens_decoder: addedTokensDecoder,
    };
    return { tokenizerJson, tokenizerConfig, bosTokenId: endOfText, eosTokenIds: [imEnd, endOfText] };
  }
  const bosTokenId = firstSpecial;
  const eotId = firstSpecial + 4;
  const tokenizerConfig = {
    tokenizer_class: "PreTrainedTokenizerFast",
    bos_token: "<|begin_of_text|>",
    eos_token: "<|eot_id|>",
    clean_up_tokenization_spaces: true,
    model_max_length: 131072,
    chat_template: chatTemplate,
    added_tokens_decoder: addedTokensDecoder,
  };
  return { tokenizerJson, tokenizerConfig, bosTokenId, eosTokenIds: [firstSpecial + 1, eotId] };
}
