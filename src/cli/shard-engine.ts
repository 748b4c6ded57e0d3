#!/usr/bin/env node
/**
 * `shard-engine`: parse the command line and start the engine. Usage and configuration errors
 * print one line and exit 1; anything else is a bug and is rethrown with its stack.
 */
import { ClusterConfigError, EngineUsageError, engineVersion, parseEngineArgs, runEngine, usage } from "../engine/index.js";

async function main(argv: string[]): Promise<void> {
  const parsed = parseEngineArgs(argv);
  if (parsed.kind === "help") {
    console.log(usage);
    return;
  }
  if (parsed.kind === "version") {
    console.log(`shard-engine ${engineVersion}`);
    return;
  }
  const engine = await runEngine(parsed.options);
  await engine.ready;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  const known = error instanceof EngineUsageError || error instanceof ClusterConfigError;
  console.error(`shard-engine: ${error instanceof Error ? error.message : String(error)}`);
  if (!known && error instanceof Error && process.env.SHARD_ENGINE_DEBUG !== undefined) console.error(error.stack);
  process.exit(1);
});
