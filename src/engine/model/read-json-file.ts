/**
 * A model file that must hold JSON (config.json, tokenizer.json, tokenizer_config.json, a
 * safetensors index), read whole: one that is not (cut short by a copy that failed, say) is said
 * naming the file and where it breaks, not as a bare parser message about an unnamed text. Nothing
 * of the text is quoted (a file put in the model's place may hold anything).
 */
import { readFileSync } from "node:fs";

export function readJsonFile(file: string): unknown {
  const text = readFileSync(file, "utf8");
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    const message = (error as Error).message;
    const at = /position (\d+)/.exec(message)?.[1];
    const where =
      at !== undefined
        ? `it breaks at character ${at} of ${text.length}`
        : /end of JSON/i.test(message)
          ? `it ends too soon (${text.length} characters)`
          : `${text.length} characters`;
    throw new Error(`${file} is not valid JSON (${where}): the file is damaged or cut short; copy it again`, { cause: error });
  }
}
