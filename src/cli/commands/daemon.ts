/** `shardctl daemon [--dir clusters] [--config shardctl.toml] [--teardown-on-exit]`: the reconciler. */
import { parseArgs } from "node:util";
import { startDaemon } from "../../reconciler/index.js";
import { contextOptions, loadContext } from "../context.js";
import { createLogger } from "../logger.js";

export const summary = "watch cluster definitions and converge what runs to them";

const usage = `usage: shardctl daemon [--dir clusters] [--config shardctl.toml] [--teardown-on-exit]
  Watches *.toml in the directory and the settings file; writes <name>.status.json beside each.
  SIGINT/SIGTERM stop watching and leave clusters running, unless --teardown-on-exit.`;

export async function run(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { ...contextOptions, "teardown-on-exit": { type: "boolean" }, help: { type: "boolean", short: "h" } },
  });
  if (values.help) {
    console.log(usage);
    return 0;
  }
  const context = await loadContext(values);
  const daemon = await startDaemon({
    dir: context.clustersDir,
    settingsFile: context.settings.file,
    log: createLogger("shardctl-daemon"),
    teardownOnExit: values["teardown-on-exit"] ?? false,
  });
  await waitForSignal();
  await daemon.stop();
  return 0;
}

/**
 * Resolves on the first SIGINT or SIGTERM. The handlers stay installed afterwards: signal-exit
 * (through execa) re-raises a signal when it believes no one else listens, which would kill the
 * process in the middle of its teardown. A third signal forces the exit.
 */
export function waitForSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    let received = 0;
    let first = 0;
    const on = (signal: NodeJS.Signals): void => {
      // signal-exit's re-raise arrives at once: only a person's later signal counts.
      if (received > 0 && Date.now() - first < 1000) return;
      received += 1;
      if (received === 1) {
        first = Date.now();
        resolve(signal);
      } else if (received >= 3) process.exit(130);
      else console.error("shardctl: stopping; send the signal again to force");
    };
    process.on("SIGINT", on);
    process.on("SIGTERM", on);
  });
}
