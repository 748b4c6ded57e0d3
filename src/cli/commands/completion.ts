/** `shardctl completion bash|zsh`: print the shell's completion script, generated from the command table. */
import { conditionTypes } from "../../reconciler/index.js";
import { renderBashCompletion, renderZshCompletion, usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";

const shells = { bash: renderBashCompletion, zsh: renderZshCompletion } as const;

export async function run(args: string[]): Promise<number> {
  const [shell, ...rest] = args;
  if (shell === undefined || rest.length > 0) throw new UsageError(`expected one shell\n${usageOf("completion")}`);
  if (shell !== "bash" && shell !== "zsh") throw new UsageError(`completion: no completion for "${shell}"; the shells are ${Object.keys(shells).join(", ")}`);
  process.stdout.write(shells[shell]({ conditions: conditionTypes }));
  return 0;
}
