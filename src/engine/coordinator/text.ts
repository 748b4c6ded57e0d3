/** Tokenizer (tokenizer.json) and chat template (tokenizer_config.json) of the served model. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { Template } from "@huggingface/jinja";
import { Tokenizer } from "@huggingface/tokenizers";

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

  constructor(modelDir: string) {
    const tokenizerJson = JSON.parse(readFileSync(join(modelDir, "tokenizer.json"), "utf8")) as object;
    const config = JSON.parse(readFileSync(join(modelDir, "tokenizer_config.json"), "utf8")) as Record<string, unknown>;
    this.tokenizer = new Tokenizer(tokenizerJson, config);
    const template = config.chat_template;
    const source = typeof template === "string" ? template : Array.isArray(template) ? (template[0] as { template?: string } | undefined)?.template : undefined;
    this.template = source === undefined ? undefined : new Template(source);
    this.bosToken = tokenText(config.bos_token);
    this.eosToken = tokenText(config.eos_token);
    this.cleanUpSpaces = config.clean_up_tokenization_spaces !== false;
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

  /** decode() without the clean-up of tokenization spaces: text that concatenates token by token. */
  decodeRaw(ids: readonly number[]): string {
    return this.tokenizer.decode([...ids], { skip_special_tokens: true, clean_up_tokenization_spaces: false });
  }

  /** What decode() adds to decodeRaw()'s text: the clean-up of tokenization spaces, when the model's tokenizer asks for it. */
  cleanUp(raw: string): string {
    return this.cleanUpSpaces ? cleanUpTokenizationSpaces(raw) : raw;
  }

  /** One token's text, special tokens included (for log probabilities). */
  tokenString(id: number): string {
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
