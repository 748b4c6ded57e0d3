/**
 * Poll `check` until it returns a value other than undefined, or the deadline passes (then
 * undefined). Every wait in launch has a deadline; the caller names the phase in its error. An
 * aborted `signal` ends the wait at once, throwing its reason.
 */
export async function waitUntil<T>(
  check: () => Promise<T | undefined>,
  options: { deadlineMs: number; intervalMs?: number; signal?: AbortSignal | undefined },
): Promise<T | undefined> {
  const { signal } = options;
  const interval = options.intervalMs ?? 50;
  // Monotonic: a wall clock stepped meanwhile (NTP) neither ends a wait early nor stretches it.
  const deadline = performance.now() + options.deadlineMs;
  for (;;) {
    signal?.throwIfAborted();
    const value = await check();
    signal?.throwIfAborted();
    if (value !== undefined) return value;
    if (performance.now() >= deadline) return undefined;
    await pause(Math.min(interval, Math.max(0, deadline - performance.now())), signal);
  }
}

/** Sleep `ms`, or less when `signal` aborts meanwhile (the caller looks at it next). */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const done = (): void => {
      clearTimeout(timer);
      signal?.removeEventListener("abort", done);
      resolve();
    };
    const timer = setTimeout(done, ms);
    signal?.addEventListener("abort", done, { once: true });
  });
}
