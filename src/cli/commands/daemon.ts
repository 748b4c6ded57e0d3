/** `shardctl daemon [--dir clusters] [--config shardctl.toml] [--teardown-on-exit]`: the reconciler. */
import { parseArgs } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";
import type { Logger } from "pino";
import { messageOf } from "../../errors/index.js";
import { startDaemon, type Daemon } from "../../reconciler/index.js";
import { contextOptions, loadContext } from "../context.js";
import { describeVersion } from "../help/index.js";
import { waitForSignal } from "../wait-for-signal.js";
import { createLogger, logFormatOption, parseLogFormat } from "../logger.js";

export async function run(args: string[]): Promise<number> {
  const { values } = parseArgs({
    args,
    options: { ...contextOptions, ...logFormatOption, "teardown-on-exit": { type: "boolean" } },
  });
  const format = parseLogFormat(values["log-format"]);
  // Nothing the daemon makes is writable by group or others, whatever umask it was started with (a
  // service manager's or a shell's 000 or 002): its ledger decides which pids it signals and which
  // folders it removes, its model blobs what the engines load, its lock whether another daemon runs.
  process.umask(process.umask(0o022) | 0o022);
  const context = await loadContext(values);
  // Listen before starting: a SIGTERM that arrives while the daemon starts (a service manager
  // stopping it at once) must stop it cleanly, not kill it with its start half done.
  let signal: NodeJS.Signals | undefined;
  const signalled = waitForSignal(["SIGINT", "SIGTERM", "SIGHUP"]).then((received) => {
    signal = received;
    return { kind: "signal" as const };
  });
  const log = createLogger("shardctl-daemon", { format });
  // Which shardctl this is, first: after an upgrade, the log says when the new one took over.
  log.info({ version: describeVersion() }, "shardctl daemon starting");
  const options = { dir: context.clustersDir, settingsFile: context.settings.file, log, teardownOnExit: values["teardown-on-exit"] ?? false };
  let daemon = await startDaemon(options);
  for (;;) {
    const end = await Promise.race([
      signalled,
      daemon.lost.then((why) => ({ kind: "lost" as const, why })),
      // A directory given through a link that now leads elsewhere: the clusters stay for the next start to adopt.
      daemon.moved.then(() => ({ kind: "moved" as const })),
    ]);
    if (end.kind === "lost") {
      console.error(`shardctl: ${end.why}`);
      await daemon.stop({ detach: true });
      return 1;
    }
    if (end.kind === "signal") {
      await daemon.stop();
      return 0;
    }
    await daemon.stop({ detach: true });
    const restarted = await restartAfterMove(
      () => startDaemon(options),
      log,
      () => signal !== undefined,
    );
    if (restarted === undefined) return 0;
    daemon = restarted;
  }
}

/**
 * Start the daemon again on the directory's new target, until it starts or a signal asks to stop
 * (undefined then): a start that fails (the new release's settings invalid, another daemon there)
 * is logged and tried again after a back-off (1 s, doubling to 30 s), the clusters running on meanwhile.
 */
async function restartAfterMove(start: () => Promise<Daemon>, log: Logger, stopping: () => boolean): Promise<Daemon | undefined> {
  for (let backOffMs = 1_000; ; backOffMs = Math.min(backOffMs * 2, 30_000)) {
    if (stopping()) return undefined;
    try {
      const daemon = await start();
      if (!stopping()) return daemon;
      await daemon.stop({ detach: true });
      return undefined;
    } catch (error) {
      log.error({ err: messageOf(error), retryInMs: backOffMs }, "the daemon could not start again on the directory's new target; it tries again");
    }
    for (const until = performance.now() + backOffMs; performance.now() < until && !stopping();) await sleep(100);
  }
}
