/** `shardctl schemas [--write] [--out schemas]`: print or write the JSON Schemas generated from the zod schemas. */
import { mkdir, writeFile } from "node:fs/promises";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { renderStatusSchema } from "../../reconciler/index.js";
import { renderSchemas } from "../../spec/index.js";

/** Every generated schema: file name → JSON text. */
export function renderAllSchemas(): Record<string, string> {
  return { ...renderSchemas(), "status.schema.json": renderStatusSchema() };
}

export async function run(args: string[]): Promise<number> {
  const { values } = parseArgs({ args, options: { write: { type: "boolean" }, out: { type: "string" } } });
  const schemas = renderAllSchemas();
  if (!values.write) {
    console.log(JSON.stringify(Object.fromEntries(Object.entries(schemas).map(([k, v]) => [k, JSON.parse(v) as unknown])), null, 2));
    return 0;
  }
  const dir = values.out ?? "schemas";
  await mkdir(dir, { recursive: true });
  for (const [name, text] of Object.entries(schemas)) {
    await writeFile(join(dir, name), text);
    console.log(`wrote ${join(dir, name)}`);
  }
  return 0;
}
