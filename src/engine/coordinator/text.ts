/** Tokenizer (tokenizer.json) and chat template (tokenizer_config.json) of the served model. */
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";
import { CompletionText } from "./completion-text.js";
import { IncrementalText } from "./incremental-text.js";
import { readJsonFile } from "../model/read-json-file.js";

export interface ChatMessage {
  role: string;
  content: string;
}

export class TextCodec {
  private readonly tokenizer: Tokenizer;
  private readonly template: Template | undefined;
  private readonly bosToken: string;
  private readonly eosToken: string;
  /** tokenizer_config.json's clean_up_tokenization_spaces (true when absent, as transformers has it). */
  private readonly cleanUpSpaces: boolean;
  /** Token strings decode() leaves out, and the strings of ids (see isSkipped). */
  private readonly specialTokens: ReadonlySet<string>;
  private readonly vocab: ArrayLike<string | undefined>;
  private readonly unknownToken: string | undefined;
  /**
   * The most characters of text one token can stand for: the longest token string (a byte-level
   * token's string has a character per byte, a text character is one byte or more; SentencePiece's
   * "▁" stands for one space), or an added token's. A text longer than the context × this cannot
   * fit the context, whatever it tokenizes to — unless the tokenizer's normalizer removes
   * characters (a strip, collapsed spaces) and the byte count no longer bounds it: Unicode NFC
   * (Qwen's) composes characters into others of at least as many UTF-8 bytes as characters
   * composed, which a byte-level token counts, so it keeps the bound.
   */
  readonly longestTokenChars: number;

  constructor(modelDir: string) {
    const tokenizerJson = readJsonFile(join(modelDir, "tokenizer.json")) as object;
    const config = readJsonFile(join(modelDir, "tokenizer_config.json")) as Record<string, unknown>;
    this.tokenizer = new Tokenizer(tokenizerJson, config);
    const template = config.chat_template;
    const source = typeof template === "string" ? template : Array.isArray(template) ? (template[0] as { template?: string } | undefined)?.template : undefined;
    this.template = source === undefined ? undefined : new Template(source);
    this.bosToken = tokenText(config.bos_token);
    this.eosToken = tokenText(config.eos_token);
    this.cleanUpSpaces = Boolean(config.clean_up_tokenization_spaces ?? true);
    // The library skips a token when its string is one of the special tokens' (added tokens marked
    // special and the config's additional_special_tokens); it keeps both lists on the tokenizer.
    const internals = this.tokenizer as unknown as { special_tokens?: string[]; model?: { vocab?: ArrayLike<string | undefined>; unk_token?: string } };
    this.specialTokens = new Set(internals.special_tokens ?? []);
    this.vocab = internals.model?.vocab ?? [];
    this.unknownToken = internals.model?.unk_token;
    let longest = 1;
    for (let id = 0; id < this.vocab.length; id++) longest = Math.max(longest, this.vocab[id]?.length ?? 0);
    for (const token of (tokenizerJson as { added_tokens?: Array<{ content?: unknown }> }).added_tokens ?? []) {
      if (typeof token.content === "string") longest = Math.max(longest, token.content.length);
    }
    this.longestTokenChars = longest;
  }

  /** Render the chat template with the generation prompt and tokenize it (special tokens recognised). */
  encodeChat(messages: ChatMessage[]): number[] {
    if (this.template === undefined) throw new Error("the model has no chat template");
    const text = this.template.render({ messages, add_generation_prompt: true, bos_token: this.bosToken, eos_token: this.eosToken });
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  encode(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }

  decode(ids: readonly number[]): string {
    return this.tokenizer.decode([...ids], { skip_special_tokens: true });
  }

  /** A completion's text, token by token, as decode() of all its tokens, and how much is settled (see CompletionText). */
  completionText(): CompletionText {
    return new CompletionText(this.incrementalText(), this);
  }

  /** A completion's raw text, token by token, as decodeRaw() of all its tokens (see IncrementalText). */
  incrementalText(): IncrementalText {
    return new IncrementalText(
      (ids) => this.decodeRaw(ids),
      (id) => this.isSkipped(id),
    );
  }

  /** decode() without the clean-up of tokenization spaces: text that concatenates token by token. */
  decodeRaw(ids: readonly number[]): string {
    return this.tokenizer.decode([...ids], { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  }

  /**
   * Whether decode() leaves token `id` out of its text: a special token, or an id with no string
   * and no unknown token to stand for it (a model's embedding rows past the tokenizer's
   * vocabulary, which decode to nothing).
   */
  isSkipped(id: number): boolean {
    const token = this.vocab[id] ?? this.unknownToken;
    return token === undefined || token === null || this.specialTokens.has(token);
  }

  /**
   * The last place at or before `end` where the clean-up of tokenization spaces may cut `raw`: not
   * after a space that could still start one of its patterns (" n" may become "n't", a space goes
   * before "."). Cut there, none of the patterns reaches across the cut, so the clean-up of the
   * text before it is a prefix of the clean-up of any longer text, and the clean-up of the whole
   * is that of the two parts joined. `end` itself when the tokenizer asks for no clean-up.
   */
  cleanCut(raw: string, end: number): number {
    if (!this.cleanUpSpaces) return end;
    let cut = end;
    for (let before = patternStart(raw, cut); before < cut; before = patternStart(raw, cut)) cut = before;
    return cut;
  }

  /** What decode() adds to decodeRaw()'s text: the clean-up of tokenization spaces, when the model's tokenizer asks for it. */
  cleanUp(raw: string): string {
    return this.cleanUpSpaces ? cleanUpTokenizationSpaces(raw) : raw;
  }

  /** One token's text, special tokens included (for log probabilities). */
  tokenString(id: number): string {
    // An id with no string (past the tokenizer's vocabulary, no unknown token) has no text; some
    // decoders would throw on it.
    if ((this.vocab[id] ?? this.unknownToken ?? undefined) === undefined) return "";
    return this.tokenizer.decode([id], { skip_special_tokens: false });
  }
}

function tokenText(value: unknown): string {
  if (typeof value === "string") return value;
  if (value !== null && typeof value === "object" && typeof (value as { content?: unknown }).content === "string") {
    return (value as { content: string }).content;
  }
  return "";
}

/**
 * Beginnings of the clean-up's patterns, longest first. The replacements run one after another, and
 * " ' " becoming "'" can make a later pattern: "  ' re" is " 're" once the first has run, so its
 * beginnings "  ' r" and "  ' v" are held too (the others such a chain can start with end in a
 * space or " '", already held).
 */
const patternPrefixes = ["  ' v", "  ' r", " 'v", " 'r", " n'", " n", " '", " "];
const longestPrefix = Math.max(...patternPrefixes.map((p) => p.length));

/** Where a beginning of a clean-up pattern ends raw[0, end), or `end` when none does. */
function patternStart(raw: string, end: number): number {
  const text = raw.slice(Math.max(0, end - longestPrefix), end);
  const prefix = patternPrefixes.find((p) => text.endsWith(p));
  return prefix === undefined ? end : end - prefix.length;
}

/**
 * transformers' clean-up of tokenization spaces (the space before punctuation and English
 * contractions that word-level tokenizers left), in its order: the same text the tokenizer
 * library's decode gives with clean_up_tokenization_spaces.
 */
function cleanUpTokenizationSpaces(text: string): string {
  return text
    .replace(/ \./g, ".")
    .replace(/ \?/g, "?")
    .replace(/ !/g, "!")
    .replace(/ ,/g, ",")
    .replace(/ ' /g, "'")
    .replace(/ n't/g, "n't")
    .replace(/ 'm/g, "'m")
    .replace(/ 's/g, "'s")
    .replace(/ 've/g, "'ve")
    .replace(/ 're/g, "'re");
}
