/** schemas/*.schema.json, generated from the zod schemas (the input side: what people write). */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { clusterSchema } from "./cluster-schema.js";
import { settingsSchema } from "./settings-schema.js";

const sources: Record<string, z.core.$ZodType> = {
  "cluster.schema.json": clusterSchema,
  "settings.schema.json": settingsSchema,
};

/** File name → JSON text (2-space indent, trailing newline) of every schema this module owns. */
export function renderSchemas(): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [name, schema] of Object.entries(sources)) {
    const json = z.toJSONSchema(schema, { io: "input", target: "draft-2020-12", unrepresentable: "throw" });
    out[name] = `${JSON.stringify(json, null, 2)}\n`;
  }
  return out;
}

/** Write the rendered schemas into `dir` (created if missing); returns the paths written. */
export async function writeSchemas(dir: string): Promise<string[]> {
  await mkdir(dir, { recursive: true });
  const written: string[] = [];
  for (const [name, text] of Object.entries(renderSchemas())) {
    const path = join(dir, name);
    await writeFile(path, text);
    written.push(path);
  }
  return written;
}
