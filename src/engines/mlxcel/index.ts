/** mlxcel: its facts, its driver, its cluster TOML and its own layer split. */
import type { Engine } from "../types.js";
import { createMlxcelDriver } from "./driver.js";
import { mlxcelFacts } from "./facts.js";

export { mlxcelFacts } from "./facts.js";
export { mlxcelSplit } from "./split-layers.js";
export { renderMlxcelClusterToml } from "./cluster-toml.js";
export { mlxcelServerArgv } from "./server-argv.js";

export const mlxcelEngine: Engine = { facts: mlxcelFacts, createDriver: createMlxcelDriver };
