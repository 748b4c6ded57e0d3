/** `shardctl help [command]`: the overview, or one command's page. */
import { commandNames, findCommand, packageVersion, renderCommandHelp, renderOverview, usageOf } from "../help/index.js";
import { UsageError } from "../usage-error.js";

export async function run(args: string[]): Promise<number> {
  if (args.length === 0) {
    console.log(renderOverview(packageVersion()));
    return 0;
  }
  if (args.length > 1) throw new UsageError(`expected one command, got ${args.length} words\n${usageOf("help")}`);
  const command = findCommand(args[0]!);
  if (command === undefined) throw new UsageError(`help: no command "${args[0]}"; the commands are ${commandNames.join(", ")}`);
  console.log(renderCommandHelp(command));
  return 0;
}
