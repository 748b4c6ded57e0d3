/** The reference engine: its facts, its driver and the bundled shard-engine it runs. */
import type { Engine } from "../types.js";
import { createReferenceDriver } from "./driver.js";
import { referenceFacts } from "./facts.js";

export { referenceFacts } from "./facts.js";
export { bundledShardEngine, bundledShardEngineCommand, shardEngineNodeFlags } from "./bundled-binary.js";

export const referenceEngine: Engine = { facts: referenceFacts, createDriver: createReferenceDriver };
