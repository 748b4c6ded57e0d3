import { builtFile } from "../../files/index.js";

/**
 * The absolute path of this installation's shard-engine entry point. It serves local nodes and
 * SSH nodes that share this file system; `[engine] binary` overrides it for other machines.
 * Run from source (vitest, tsx) this module sits in src/, beside shard-engine.ts only: node cannot
 * run that directly, so the build's dist/src/cli/shard-engine.js is used instead.
 */
export const bundledShardEngine = locateShardEngine();

/**
 * Node.js flags shard-engine runs under, so that a stage's memory is its weights:
 * - `--max-semi-space-size=1` caps V8's young generation at 1 MiB per semi-space (by default it
 *   grew to 6–8 MiB per stage, all resident); per-token garbage is small.
 * - `--optimize-for-size` collects the old generation early (the weights live in WebAssembly
 *   memory, which V8 does not count as heap pressure, so transport garbage would pile up for
 *   megabytes) and keeps the idle runtime about 6 MiB smaller. The hot loops are WebAssembly,
 *   which it does not slow.
 *
 * V8 reads both when it starts, so they must be on node's command line: set from inside the
 * program, the first has no effect and the second only part of its. shard-engine's own first
 * lines (a shell line that execs node) carry the same flags for an engine started as a program;
 * a test keeps the two lists the same.
 */
export const shardEngineNodeFlags: readonly string[] = ["--max-semi-space-size=1", "--optimize-for-size"];

/** The command that runs this installation's shard-engine under this Node.js, flags included. */
export const bundledShardEngineCommand: readonly string[] = [process.execPath, ...shardEngineNodeFlags, bundledShardEngine];

function locateShardEngine(): string {
  return builtFile(import.meta.url, "../../cli/shard-engine.js");
}
