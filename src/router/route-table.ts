/**
 * Which backend serves a model next: smooth weighted round robin (nginx's algorithm; weight defaults
 * to 1) among the backends that list the model and are not cooling off after a connection failure.
 */
import type { BackendEntry } from "./types.js";

export type RouteTable = {
  /** Backends to try for `model`, best first; empty when no backend lists it. */
  candidates(model: string): BackendEntry[];
  /** Every model some backend lists, with the backends listing it, sorted by model id. */
  models(): Array<{ id: string; backends: string[] }>;
  /** Skip `name` for `cooldownMs` (it refused a connection); it is still tried when all are down. */
  markDown(name: string, cooldownMs: number): void;
  markUp(name: string): void;
};

export function createRouteTable(backends: BackendEntry[], now: () => number = Date.now): RouteTable {
  const byModel = new Map<string, BackendEntry[]>();
  for (const backend of backends) {
    for (const model of new Set(backend.models)) {
      const list = byModel.get(model) ?? [];
      list.push(backend);
      byModel.set(model, list);
    }
  }
  // Running "current weight" per model and backend, as smooth WRR needs.
  const current = new Map<string, Map<string, number>>();
  const downUntil = new Map<string, number>();

  const candidates = (model: string): BackendEntry[] => {
    const all = byModel.get(model);
    if (all === undefined) return [];
    const at = now();
    const up = all.filter((backend) => (downUntil.get(backend.name) ?? 0) <= at);
    const down = all.filter((backend) => !up.includes(backend));
    if (up.length === 0) return down;
    const weights = current.get(model) ?? new Map<string, number>();
    current.set(model, weights);
    let total = 0;
    let best: BackendEntry | undefined;
    let bestWeight = -Infinity;
    for (const backend of up) {
      const weight = backend.weight ?? 1;
      total += weight;
      const value = (weights.get(backend.name) ?? 0) + weight;
      weights.set(backend.name, value);
      if (value > bestWeight) {
        bestWeight = value;
        best = backend;
      }
    }
    if (best === undefined) return down;
    weights.set(best.name, bestWeight - total);
    // Fail over to the others in list order starting after the chosen one, then the cooling ones.
    const start = up.indexOf(best);
    return [...up.slice(start), ...up.slice(0, start), ...down];
  };

  return {
    candidates,
    models: () =>
      [...byModel.entries()].map(([id, list]) => ({ id, backends: list.map((backend) => backend.name) })).sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0)),
    markDown: (name, cooldownMs) => void downUntil.set(name, now() + cooldownMs),
    markUp: (name) => void downUntil.delete(name),
  };
}
