/**
 * The engine kinds a cluster definition may name in `[engine] kind`. The spec's zod enum is built
 * from this tuple, so its order is the order the JSON Schema and messages list them in.
 */
export const engineKinds = ["mlxcel", "reference", "mlx-lm"] as const;

export type EngineKind = (typeof engineKinds)[number];

/** The kind a definition without `[engine] kind` runs: the production engine. */
export const defaultEngineKind: EngineKind = "mlxcel";

/** Whether a value read from a definition names a known engine kind. */
export function isEngineKind(value: unknown): value is EngineKind {
  return typeof value === "string" && (engineKinds as readonly string[]).includes(value);
}
