/**
 * The engine kinds and what each one is. Adding an engine means adding its folder, its kind to
 * `engineKinds` and one line here; TypeScript refuses a kind without an entry.
 */
import type { EngineKind } from "./kinds.js";
import { engineKinds } from "./kinds.js";
import { mlxLmEngine } from "./mlx-lm/index.js";
import { mlxcelEngine } from "./mlxcel/index.js";
import { referenceEngine } from "./reference/index.js";
import type { DriverOptions, Engine, EngineDriver, EngineFacts } from "./types.js";

const engines: Readonly<Record<EngineKind, Engine>> = {
  mlxcel: mlxcelEngine,
  reference: referenceEngine,
  "mlx-lm": mlxLmEngine,
};

/** The facts of an engine kind. */
export function engineOf(kind: EngineKind): EngineFacts {
  return engines[kind].facts;
}

/** The driver of an engine kind, for one launch. */
export function createDriver(kind: EngineKind, options: DriverOptions): EngineDriver {
  return engines[kind].createDriver(options);
}

/** The kinds whose facts pass `test`, in `engineKinds` order (for "use kind = …" hints). */
export function selectKinds(test: (facts: EngineFacts) => boolean): EngineKind[] {
  return engineKinds.filter((kind) => test(engineOf(kind)));
}
