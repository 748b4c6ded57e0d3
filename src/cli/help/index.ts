/**
 * src/cli/help: the command table (every command's purpose, usage, flags, exit codes, example) and
 * everything rendered from it: help pages, shell completions, the version.
 */
export {
  commandTable,
  commandNames,
  findCommand,
  type CommandName,
  type CommandEntry,
  type CommandSpec,
  type Completion,
  type FlagSpec,
  type ExitCode,
} from "./command-table.js";
export { renderOverview, renderCommandHelp, usageOf } from "./render-help.js";
export { renderBashCompletion, type CompletionFacts } from "./bash-completion.js";
export { renderZshCompletion } from "./zsh-completion.js";
export { describeVersion, packageVersion } from "./package-version.js";
