/**
 * Resident memory as the engine reports it: measured after a full garbage collection, so a figure
 * is the memory that is live — weights, caches, runtime — not how far V8 happens to be behind on
 * garbage (the weights live in WebAssembly memory, which V8 does not count as heap pressure, so
 * its collections come late and at random).
 */
import { getHeapSpaceStatistics, setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";

export interface MemoryFigures {
  /** Resident set, bytes. */
  rss: number;
  /** V8 heap reserved, bytes. */
  heapTotal: number;
  /** ArrayBuffer and Buffer memory outside the heap, bytes. */
  arrayBuffers: number;
  /** V8's young generation (new space) in memory, bytes: 2 MiB under shard-engine's node flags. */
  youngGeneration: number;
}

let collector: (() => void) | undefined;

/** Resident set and its main parts, bytes, after a full collection. */
export function residentMemory(): MemoryFigures {
  collectGarbage();
  const m = process.memoryUsage();
  const young = getHeapSpaceStatistics().find((space) => space.space_name === "new_space")?.physical_space_size ?? 0;
  return { rss: m.rss, heapTotal: m.heapTotal, arrayBuffers: m.arrayBuffers, youngGeneration: young };
}

/** A full, synchronous garbage collection (a few milliseconds on a stage's small heap). */
function collectGarbage(): void {
  if (collector === undefined) {
    // V8 installs `gc` in contexts created while the flag is set.
    setFlagsFromString("--expose-gc");
    collector = runInNewContext("gc") as () => void;
  }
  collector();
}
