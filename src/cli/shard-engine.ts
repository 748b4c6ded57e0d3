#!/bin/sh
//usr/bin/env true; exec node --max-semi-space-size=1 --optimize-for-size "$0" "$@"
/**
 * `shard-engine`: parse the command line and start the engine. Any failure to start (usage,
 * cluster file, model, unreachable stage) prints one line and exits 1; SHARD_ENGINE_DEBUG=1 adds
 * the stack of unexpected errors.
 */
import { setFlagsFromString } from "node:v8";
import { outOfDescriptorsAdvice } from "./out-of-descriptors.js";

// The engine's modules are loaded by main, so that a process started with too few file
// descriptors to load them (Node opens many at once) says so in one line instead of a stack.
type Engine = typeof import("../engine/index.js");
let engine: Engine | undefined;

// A stage's memory should be its weights. Run as a program, the first two lines (a POSIX shell
// line to sh, a comment to JavaScript) exec node with the heap flags shard-engine needs (see
// shardEngineNodeFlags in src/engines/reference); the launch drivers pass the same flags when they
// run this file under node. V8 reads them at start-up, so they cannot be set from here (nor
// through `env -S`, which BusyBox and older coreutils lack).
// Compile the WebAssembly kernels optimised, whole, when their module is compiled (before the
// weights load) instead of baseline first and optimised once hot: no slow first tokens, and the
// optimising compiler's memory belongs to the idle runtime instead of growing a loaded stage.
setFlagsFromString("--no-wasm-dynamic-tiering");
setFlagsFromString("--no-wasm-lazy-compilation");

async function main(argv: string[]): Promise<void> {
  engine = await import("../engine/index.js");
  const { engineVersion, parseEngineArgs, runEngine, usage } = engine;
  const parsed = parseEngineArgs(argv);
  if (parsed.kind === "help") {
    console.log(usage);
    return;
  }
  if (parsed.kind === "version") {
    console.log(`shard-engine ${engineVersion}`);
    return;
  }
  const running = await runEngine(parsed.options);
  // The HTTP roles stop gracefully: what they generate may finish (see drain), then the process
  // ends by the signal as it would have at once, so its exit status still says SIGTERM. A stage
  // keeps the default: it stops at once (a teardown stops it after its coordinator).
  const drain = running.drain;
  if (drain !== undefined) {
    process.once("SIGTERM", () => {
      void drain(parsed.options.drainMs).finally(() => process.kill(process.pid, "SIGTERM"));
    });
  }
  await running.ready;
}

main(process.argv.slice(2)).catch((error: unknown) => {
  // Out of file descriptors: said a moment later, once the opens still under way have failed too
  // and the limits can be read.
  if (outOfDescriptorsAdvice(error, "shard-engine") !== undefined) {
    setTimeout(() => {
      console.error(`shard-engine: ${outOfDescriptorsAdvice(error, "shard-engine")}`);
      process.exit(1);
    }, 100);
    return;
  }
  const known = engine !== undefined && (error instanceof engine.EngineUsageError || error instanceof engine.ClusterConfigError);
  console.error(`shard-engine: ${error instanceof Error ? error.message : String(error)}`);
  if (!known && error instanceof Error && process.env.SHARD_ENGINE_DEBUG !== undefined) console.error(error.stack);
  process.exit(1);
});
