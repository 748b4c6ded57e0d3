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
      if (received > 0 && performance.now() - first < 1000) return;
      received += 1;
      if (received === 1) {
        first = performance.now();
        resolve(signal);
      } else if (received >= 3) process.exit(130);
      else console.error("shardctl: stopping; send the signal again to force");
    };
    for (const signal of signals) process.on(signal, on);
  });
}
