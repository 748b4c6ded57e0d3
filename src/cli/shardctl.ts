#!/usr/bin/env node
/**
 * `shardctl`: parses the command name and hands the rest to that command's module. Commands live in
 * ./commands/<name>.ts and export `run(args): Promise<number>` (the exit code). Usage errors print a
 * message and exit 1; anything else is a bug and is rethrown with its stack.
 */
import { UsageError } from "./usage-error.js";
import { isShardctlError } from "../errors/index.js";

type Command = { run: (args: string[]) => Promise<number>; summary: string };

const commands: Record<string, () => Promise<Command>> = {
  plan: () => import("./commands/plan.js"),
  "make-test-model": () => import("./commands/make-test-model.js"),
  schemas: () => import("./commands/schemas.js"),
  daemon: () => import("./commands/daemon.js"),
  status: () => import("./commands/status.js"),
  wait: () => import("./commands/wait.js"),
  reconcile: () => import("./commands/reconcile.js"),
  diff: () => import("./commands/diff.js"),
  validate: () => import("./commands/validate.js"),
  router: () => import("./commands/router.js"),
  nodes: () => import("./commands/nodes.js"),
  stage: () => import("./commands/stage.js"),
};

function printUsage(): void {
  console.log("usage: shardctl <command> [options]\n\ncommands:");
  for (const name of Object.keys(commands)) console.log(`  ${name}`);
  console.log("\nRun `shardctl <command> --help` for a command's options.");
}

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === undefined || name === "--help" || name === "-h" || name === "help") {
    printUsage();
    return name === undefined ? 1 : 0;
  }
  const load = commands[name];
  if (load === undefined) throw new UsageError(`unknown command "${name}"; run \`shardctl --help\` for the list`);
  const command = await load();
  try {
    return await command.run(args);
  } catch (error) {
    // node:util parseArgs refusing an option is a usage error, not a crash: say which, and how to
    // get the command's options. `--help` on a command that has none gets its summary.
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS")) {
      if (args.includes("--help") || args.includes("-h")) {
        console.log(`shardctl ${name}: ${command.summary}`);
        return 0;
      }
      throw new UsageError(`${name}: ${(error as Error).message.split(". ")[0]}; run \`shardctl ${name} --help\``);
    }
    throw error;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (error: unknown) => {
    if (error instanceof UsageError || isShardctlError(error)) {
      console.error(`shardctl: ${error.message}`);
      process.exitCode = 1;
      return;
    }
    throw error;
  },
);
