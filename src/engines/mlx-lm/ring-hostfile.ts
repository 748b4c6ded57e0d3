import type { EngineTopology } from "../types.js";
import { rankOfStage } from "./split-layers.js";

/**
 * MLX's ring hostfile (`MLX_HOSTFILE`): a JSON list with one entry per rank in rank order, each a
 * list of "ip:port" strings. Ranks run in reverse layer order, so the last stage comes first.
 */
export function renderRingHostfile(topology: EngineTopology): string {
  const byRank = [...topology.stages].sort((a, b) => rankOfStage(a.index, topology.stages.length) - rankOfStage(b.index, topology.stages.length));
  return JSON.stringify(byRank.map((stage) => [`${stage.address.host}:${stage.address.port}`])) + "\n";
}

/**
 * The order ranks are started in, as waves of stage indices (layer order). The ring's ranks 0..N-2
 * accept their left neighbour, and rank N-1 connects to rank 0 with a few retries over ~31 s: so
 * every accepting rank is started and seen listening first, then rank N-1 (stage 0).
 */
export function ringStartOrder(topology: EngineTopology): number[][] {
  const stages = topology.stages.map((s) => s.index);
  const accepting = stages.filter((index) => index !== 0).sort((a, b) => b - a);
  return [accepting, [0]];
}
