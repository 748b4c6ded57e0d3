/**
 * A real byte-level BPE tokenizer (the GPT-2/Llama-3 scheme) sized to the test model's vocabulary:
 * 256 byte tokens, a few merges of common English pairs, the Llama-3 special tokens, and reserved
 * special tokens filling the rest of the vocabulary.
 */

/** Special tokens, in id order after the byte and merge tokens. */
export const specialTokens = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"] as const;

/** Llama-3's chat template. */
export const chatTemplate =
  "{{ bos_token }}{% for message in messages %}{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n' + message['content'] | trim + '<|eot_id|>' }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";

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
function byteToUnicode(): string[] {
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

export interface TokenizerFiles {
  tokenizerJson: object;
  tokenizerConfig: object;
  bosTokenId: number;
  eosTokenIds: number[];
}

/** Build tokenizer.json and tokenizer_config.json for a vocabulary of `vocabSize` ids (>= 261). */
export function buildTokenizer(vocabSize: number): TokenizerFiles {
  const minimum = 256 + specialTokens.length;
  if (vocabSize < minimum) throw new RangeError(`vocab must be at least ${minimum}, got ${vocabSize}`);
  const vocab: Record<string, number> = {};
  for (const ch of byteToUnicode()) vocab[ch] = Object.keys(vocab).length;
  const merges: string[] = [];
  for (const [left, right] of mergeCandidates) {
    if (Object.keys(vocab).length >= vocabSize - specialTokens.length) break;
    vocab[left + right] = Object.keys(vocab).length;
    merges.push(`${left} ${right}`);
  }
  const firstSpecial = Object.keys(vocab).length;
  const added: string[] = [...specialTokens];
  for (let i = firstSpecial + specialTokens.length; i < vocabSize; i++) {
    added.push(`<|reserved_special_token_${i - firstSpecial - specialTokens.length}|>`);
  }
  const addedTokens = added.map((content, i) => ({
    id: firstSpecial + i,
    content,
    single_word: false,
    lstrip: false,
    rstrip: false,
    normalized: false,
    special: true,
  }));
  const byteLevel = { type: "ByteLevel", add_prefix_space: false, trim_offsets: true, use_regex: true };
  const tokenizerJson = {
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
  const bosTokenId = firstSpecial;
  const eotId = firstSpecial + 4;
  const tokenizerConfig = {
    tokenizer_class: "PreTrainedTokenizerFast",
    bos_token: "<|begin_of_text|>",
    eos_token: "<|eot_id|>",
    clean_up_tokenization_spaces: true,
    model_max_length: 131072,
    chat_template: chatTemplate,
    added_tokens_decoder: Object.fromEntries(addedTokens.map(({ id, ...token }) => [String(id), token])),
  };
  return { tokenizerJson, tokenizerConfig, bosTokenId, eosTokenIds: [firstSpecial + 1, eotId] };
}
