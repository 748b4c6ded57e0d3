/**
 * src/engines: the single source of engine facts. One folder per engine kind (its facts, its
 * driver, its own files); the planner, the spec checks, the node probes, launch and health ask
 * `engineOf(kind)` instead of comparing kind strings. Imports no other concern of shardctl.
 */
export { engineKinds, defaultEngineKind, isEngineKind, type EngineKind } from "./kinds.js";
export { engineOf, createDriver, selectKinds } from "./registry.js";
export { canRunOn, selectKindsRunningOn, quoteKinds } from "./runs-on.js";
export { bundledShardEngine, bundledShardEngineCommand, shardEngineNodeFlags } from "./reference/index.js";
export type * from "./types.js";
