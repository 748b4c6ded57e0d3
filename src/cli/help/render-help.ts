/** The help texts, rendered from the command table: the overview and one page per command. */
import { commandTable, findCommand, type CommandName, type CommandSpec, type FlagSpec } from "./command-table.js";

/** Paragraphs wrap here (columns): wide enough for a usage line, narrow enough for a split terminal. */
const wrapColumns = 100;

/** `shardctl help`, `shardctl --help` and a bare `shardctl`. */
export function renderOverview(version: string): string {
  const width = Math.max(...commandTable.map((command) => command.name.length));
  return [
    `shardctl ${version}: serve one large language model across several machines with pipeline parallelism, the GitOps way`,
    "",
    "usage: shardctl <command> [flags]",
    "       shardctl --version | --help",
    "",
    "commands:",
    ...commandTable.map((command) => `  ${command.name.padEnd(width)}  ${command.purpose}`),
    "",
    ...wrap(
      "Every command that reads settings or definitions finds shardctl.toml in the current directory (or --config) and the definitions in clusters/ beside it (or --dir). A usage error exits 1.",
    ),
    "Run `shardctl help <command>` or `shardctl <command> --help` for its flags, defaults, exit codes and an example.",
  ].join("\n");
}

/** `shardctl help <command>` and `shardctl <command> --help`. */
export function renderCommandHelp(command: CommandSpec): string {
  const flags: FlagSpec[] = [...command.flags, { name: "--help", short: "-h", description: "show this help" }];
  const labels = flags.map(flagLabel);
  const width = Math.max(...labels.map((label) => label.length));
  const codeWidth = Math.max(...command.exitCodes.map((exit) => String(exit.code).length));
  return [
    `shardctl ${command.name}: ${command.purpose}`,
    "",
    `usage: ${command.usage}`,
    ...(command.details ?? []).flatMap((paragraph) => ["", ...wrap(paragraph)]),
    "",
    "flags:",
    ...flags.flatMap((flag, i) => hang(`  ${labels[i]!.padEnd(width)}  `, `${flag.description}${flag.default === undefined ? "" : ` (default: ${flag.default})`}`)),
    "",
    "exit codes:",
    ...command.exitCodes.flatMap((exit) => hang(`  ${String(exit.code).padStart(codeWidth)}  `, exit.meaning)),
    "",
    "example:",
    `  ${command.example}`,
  ].join("\n");
}

/** The one-line synopsis a usage error ends with. */
export function usageOf(name: CommandName): string {
  return `usage: ${findCommand(name)!.usage}`;
}

/** `-w, --watch`, `--config <file>`. */
function flagLabel(flag: FlagSpec): string {
  const names = flag.short === undefined ? flag.name : `${flag.short}, ${flag.name}`;
  return flag.value === undefined ? names : `${names} ${flag.value}`;
}

/** `text` after `label`, wrapped, its further lines indented to start under its first. */
function hang(label: string, text: string): string[] {
  const indent = " ".repeat(label.length);
  return wrap(text, wrapColumns - label.length).map((line, i) => `${i === 0 ? label : indent}${line}`);
}

/** Greedy word wrap at `columns`; a word longer than a line gets a line of its own. */
function wrap(paragraph: string, columns = wrapColumns): string[] {
  const lines: string[] = [];
  let line = "";
  for (const word of paragraph.split(/\s+/)) {
    if (line !== "" && line.length + 1 + word.length > columns) {
      lines.push(line);
      line = word;
    } else line = line === "" ? word : `${line} ${word}`;
  }
  if (line !== "") lines.push(line);
  return lines;
}
