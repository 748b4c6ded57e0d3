import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

/**
 * The absolute path of this installation's shard-engine entry point. It serves local nodes and
 * SSH nodes that share this file system; `[engine] binary` overrides it for other machines.
 * Run from source (vitest, tsx) this module sits in src/, beside shard-engine.ts only: node cannot
 * run that directly, so the build's dist/src/cli/shard-engine.js is used instead.
 */
export const bundledShardEngine = locateShardEngine();

function locateShardEngine(): string {
  const beside = fileURLToPath(new URL("../../cli/shard-engine.js", import.meta.url));
  if (existsSync(beside) || !import.meta.url.endsWith(".ts")) return beside;
  return fileURLToPath(new URL("../../../dist/src/cli/shard-engine.js", import.meta.url));
}
