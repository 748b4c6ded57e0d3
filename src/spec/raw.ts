/** Reading parsed-but-unvalidated TOML data defensively, for checks that run beside the schema. */
import type { KeyPath } from "./locate.js";

/** The value at `path` in `data`, or undefined when any step is missing or of the wrong kind. */
export function getRaw(data: unknown, path: KeyPath): unknown {
  let current = data;
  for (const part of path) {
    if (typeof part === "number") current = Array.isArray(current) ? current[part] : undefined;
    else current = isTable(current) ? current[part] : undefined;
  }
  return current;
}

export function isTable(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value) && !(value instanceof Date);
}

/** The string at `path` when it is a string matching `pattern`, else undefined. */
export function getString(data: unknown, path: KeyPath, pattern?: RegExp): string | undefined {
  const value = getRaw(data, path);
  return typeof value === "string" && (pattern === undefined || pattern.test(value)) ? value : undefined;
}

/** Freeze a value and everything reachable from it. */
export function deepFreeze<T>(value: T): T {
  if (typeof value === "object" && value !== null && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const inner of Object.values(value)) deepFreeze(inner);
  }
  return value;
}
