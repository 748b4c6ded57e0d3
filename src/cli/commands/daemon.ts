/** `shardctl daemon [--dir clusters] [--config shardctl.toml] [--teardown-on-exit]`: the reconciler. */
import { parseArgs } from "node:util";
import { startDaemon } from "../../reconciler/index.js";
import { contextOptions, loadContext } from "../context.js";
import { createLogger, logFormatOption, parseLogFormat } from "../logger.js";

export async function run(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { ...contextOptions, ...logFormatOption, "teardown-on-exit": { type: "boolean" } },
  });
  const format = parseLogFormat(values["log-format"]);
  const context = await loadContext(values);
  // Listen before starting: a SIGTERM that arrives while the daemon starts (a service manager
  // stopping it at once) must stop it cleanly, not kill it with its start half done.
  const signalled = waitForSignal().then(() => ({ kind: "signal" as const }));
  const log = createLogger("shardctl-daemon", { format });
  for (;;) {
    const daemon = await startDaemon({
      dir: context.clustersDir,
      settingsFile: context.settings.file,
      log,
      teardownOnExit: values["teardown-on-exit"] ?? false,
    });
    const end = await Promise.race([
      signalled,
      daemon.lost.then((why) => ({ kind: "lost" as const, why })),
      // A directory given through a link that now leads elsewhere: the clusters stay for the next start to adopt.
      daemon.moved.then(() => ({ kind: "moved" as const })),
    ]);
    if (end.kind === "moved") {
      await daemon.stop({ detach: true });
      continue;
    }
    if (end.kind === "lost") {
      console.error(`shardctl: ${end.why}`);
      await daemon.stop({ detach: true });
      return 1;
    }
    await daemon.stop();
    return 0;
  }
}

/**
 * Resolves on the first of `signals` (SIGINT or SIGTERM by default). The handlers stay installed afterwards: signal-exit
 * (through execa) re-raises a signal when it believes no one else listens, which would kill the
 * process in the middle of its teardown. A third signal forces the exit.
 */
export function waitForSignal(signals: readonly NodeJS.Signals[] = ["SIGINT", "SIGTERM"]): Promise<NodeJS.Signals> {
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
    for (const signal of signals) process.on(signal, on);
  });
}
