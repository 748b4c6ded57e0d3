#!/usr/bin/env node
/**
 * `shardctl`: parses the command name and hands the rest to that command's module. The command
 * table (./help) is the one list of commands: `--help` on any of them is answered here from it.
 * Commands live in ./commands/<name>.ts and export `run(args): Promise<number>` (the exit code).
 * Usage errors print a message and exit 1; anything else is a bug and is rethrown with its stack.
 */
import { UsageError } from "./usage-error.js";
import { closestName, isShardctlError, showText } from "../errors/index.js";
import { outOfDescriptorsAdvice } from "./out-of-descriptors.js";
import { commandNames, describeVersion, findCommand, packageVersion, renderCommandHelp, renderOverview, type CommandName } from "./help/index.js";

type Command = { run: (args: string[]) => Promise<number> };

/**
 * The module of a command of the table: ./commands/<name>.js, loaded on demand so that `--version`
 * or `status` never pays for the daemon's imports. The table is the registry: a command is added by
 * its row there and its file in ./commands (a test holds the two together).
 */
async function loadCommand(name: CommandName): Promise<Command> {
  return (await import(`./commands/${name}.js`)) as Command;
}

async function main(argv: string[]): Promise<number> {
  const [name, ...args] = argv;
  if (name === "--version" || name === "-V") {
    console.log(`shardctl ${describeVersion()}`);
    return 0;
  }
  if (name === undefined || name === "--help" || name === "-h") {
    console.log(renderOverview(packageVersion()));
    // A bare `shardctl` asked for nothing: say how to use it, but as a failure for scripts.
    return name === undefined ? 1 : 0;
  }
  const spec = findCommand(name);
  if (spec === undefined && name.startsWith("-")) {
    throw new UsageError(
      `unknown option "${name}" before a command; shardctl itself takes --version (-V) and --help (-h), and each command its own (\`shardctl help <command>\`)`,
    );
  }
  if (spec === undefined) {
    const meant = closestName(name, commandNames);
    const guess = meant === undefined ? "" : ` (did you mean "${meant}"?)`;
    throw new UsageError(`unknown command "${name}"${guess}; the commands are ${commandNames.join(", ")} (\`shardctl help <command>\` for one)`);
  }
  // No shardctl flag takes "--help" or "-h" as its value, so either one anywhere asks for help;
  // after "--" it is an operand (a path named -h), as for any other option.
  const options = args.includes("--") ? args.slice(0, args.indexOf("--")) : args;
  if (options.includes("--help") || options.includes("-h")) {
    console.log(renderCommandHelp(spec));
    return 0;
  }
  const command = await loadCommand(spec.name);
  try {
    return await command.run(args);
  } catch (error) {
    // node:util parseArgs refusing an option is a usage error, not a crash: say which, and how to
    // get the command's options.
    const code = (error as { code?: unknown }).code;
    if (typeof code === "string" && code.startsWith("ERR_PARSE_ARGS")) {
      // An unknown option close to one of the command's gets a guess: `--confg` → `--config`.
      const unknown = code === "ERR_PARSE_ARGS_UNKNOWN_OPTION" ? /'(--[^']+)'/.exec((error as Error).message)?.[1] : undefined;
      const meant =
        unknown === undefined
          ? undefined
          : closestName(
              unknown,
              spec.flags.map((flag) => flag.name),
            );
      const guess = meant === undefined ? "" : ` (did you mean ${meant}?)`;
      throw new UsageError(`${name}: ${(error as Error).message.split(". ")[0]}${guess}; run \`shardctl ${name} --help\``);
    }
    throw error;
  }
}

// Output nobody can read is not success: a reader that went away (EPIPE: `| head`) ends the
// command quietly, any other failure to write stdout (ENOSPC: a full disk under `> plan.json`) is
// said on stderr and exits 1. console.log alone swallows both, and a bare process.stdout.write
// crashes with a stack.
let stdoutFailed = false;
process.stdout.on("error", (error: NodeJS.ErrnoException) => {
  if (error.code === "EPIPE") process.exit(process.exitCode ?? 0);
  if (!stdoutFailed) console.error(`shardctl: cannot write the output: ${error.message}`);
  stdoutFailed = true;
  process.exitCode = 1;
});

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = stdoutFailed ? 1 : code;
  },
  (error: unknown) => {
    if (error instanceof UsageError || isShardctlError(error)) {
      // A message can echo a remote command's output or a file's name: shown, never obeyed by the terminal.
      console.error(`shardctl: ${showText(error.message, { keepLines: true })}`);
      process.exitCode = 1;
      return;
    }
    // A file the command was asked to write that the system refuses (a read-only or full folder,
    // no permission, no such directory): the operator's to fix, said as such, not a stack.
    const fsCode = (error as NodeJS.ErrnoException | null)?.code;
    if (
      typeof fsCode === "string" &&
      ["EACCES", "EPERM", "EROFS", "ENOSPC", "EDQUOT", "ENOENT", "ENOTDIR", "EISDIR", "EEXIST"].includes(fsCode) &&
      (error as NodeJS.ErrnoException).syscall !== undefined
    ) {
      console.error(`shardctl: ${showText((error as Error).message)}`);
      process.exitCode = 1;
      return;
    }
    // Out of file descriptors (loading a command's modules, or later): what to raise, not a stack.
    // Said a moment later, once the opens still under way have failed too and the limits can be read.
    if (outOfDescriptorsAdvice(error, "shardctl") !== undefined) {
      setTimeout(() => {
        console.error(`shardctl: ${outOfDescriptorsAdvice(error, "shardctl")}`);
        process.exitCode = 1;
      }, 100);
      return;
    }
    throw error;
  },
);
