/**
 * Engine drivers: one interface, one file per engine. Adding an engine means adding its file and
 * one line to `drivers`.
 */
import { createMlxcelDriver } from "./mlxcel.js";
import { createReferenceDriver } from "./reference.js";
import type { DriverOptions, EngineDriver } from "./types.js";

export type * from "./types.js";
export { renderMlxcelClusterToml } from "./cluster-toml.js";
export { bundledShardEngine } from "./reference.js";

const drivers = {
  mlxcel: createMlxcelDriver,
  reference: createReferenceDriver,
} satisfies Record<string, (options: DriverOptions) => EngineDriver>;

export type EngineKind = keyof typeof drivers;

/** The driver for an engine kind. */
export function createDriver(kind: EngineKind, options: DriverOptions): EngineDriver {
  return drivers[kind](options);
}
