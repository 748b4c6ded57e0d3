/** mlx-lm: its facts, its driver, MLX's ring hostfile and mlx-lm's reversed layer split. */
import type { Engine } from "../types.js";
import { createMlxLmDriver } from "./driver.js";
import { mlxLmFacts } from "./facts.js";

export { mlxLmFacts, mlxLmPipelineFamilies } from "./facts.js";
export { mlxLmSplit, rankOfStage } from "./split-layers.js";
export { describeSplitDefect } from "./split-defect.js";
export { ringNeighbourUnreachableIn } from "./ring-log.js";
export { renderRingHostfile, ringStartOrder } from "./ring-hostfile.js";

export const mlxLmEngine: Engine = { facts: mlxLmFacts, createDriver: createMlxLmDriver };
