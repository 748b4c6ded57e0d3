/** The keys a table accepts at a path of a zod object schema, for "unknown key (allowed: …)". */
import type { z } from "zod";
import type { KeyPath } from "./locate.js";

// The slice of zod's internal definition this walk needs; wrappers are seen through.
interface Def {
  type: string;
  innerType?: z.core.$ZodType;
  in?: z.core.$ZodType;
  shape?: Record<string, z.core.$ZodType>;
  valueType?: z.core.$ZodType;
  element?: z.core.$ZodType;
}

const defOf = (schema: z.core.$ZodType): Def => schema._zod.def as unknown as Def;

function unwrap(schema: z.core.$ZodType): z.core.$ZodType {
  let current = schema;
  for (;;) {
    const def = defOf(current);
    const next = def.innerType ?? (def.type === "pipe" ? def.in : undefined);
    if (next === undefined) return current;
    current = next;
  }
}

/** Keys of the object schema found by following `path` from `root`; [] when there is none. */
export function listAllowedKeys(root: z.core.$ZodType, path: KeyPath): string[] {
  let current: z.core.$ZodType | undefined = unwrap(root);
  for (const part of path) {
    const def: Def = defOf(current);
    if (def.type === "object" && typeof part === "string") current = def.shape?.[part];
    else if (def.type === "record") current = def.valueType;
    else if (def.type === "array") current = def.element;
    else current = undefined;
    if (current === undefined) return [];
    current = unwrap(current);
  }
  const def = defOf(current);
  return def.type === "object" ? Object.keys(def.shape ?? {}) : [];
}
