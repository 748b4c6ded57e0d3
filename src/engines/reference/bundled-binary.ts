import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * The absolute path of this installation's shard-engine entry point. It serves local nodes and
 * SSH nodes that share this file system; `[engine] binary` overrides it for other machines.
 * Run from source (vitest, tsx) this module sits in src/, beside shard-engine.ts only: node cannot
 * run that directly, so the build's dist/src/cli/shard-engine.js is used instead.
 */
export const bundledShardEngine = locateShardEngine();

/**
 * Node.js flags shard-engine runs under. `--max-semi-space-size=1` caps V8's young generation at
 * 1 MiB per semi-space (by default it grew to 6–8 MiB per stage, all resident): a stage's memory
 * should be its weights, and its per-token garbage is small. V8 sizes the young generation when
 * it starts, so the flag must be on node's command line — set from inside the program it has no
 * effect. shard-engine's own first lines (a shell line that execs node) carry the same flags for an
 * engine started as a program.
 */
export const shardEngineNodeFlags: readonly string[] = ["--max-semi-space-size=1"];

/** The command that runs this installation's shard-engine under this Node.js, flags included. */
export const bundledShardEngineCommand: readonly string[] = [process.execPath, ...shardEngineNodeFlags, bundledShardEngine];

function locateShardEngine(): string {
  const beside = fileURLToPath(new URL("../../cli/shard-engine.js", import.meta.url));
  if (existsSync(beside) || !import.meta.url.endsWith(".ts")) return beside;
  return fileURLToPath(new URL("../../../dist/src/cli/shard-engine.js", import.meta.url));
}
