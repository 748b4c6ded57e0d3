/**
 * Poll `check` until it returns a value other than undefined, or the deadline passes (then
 * undefined). Every wait in launch has a deadline; the caller names the phase in its error.
 */
export async function waitUntil<T>(check: () => Promise<T | undefined>, options: { deadlineMs: number; intervalMs?: number }): Promise<T | undefined> {
  const interval = options.intervalMs ?? 50;
  const deadline = Date.now() + options.deadlineMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() >= deadline) return undefined;
    await new Promise((resolve) => setTimeout(resolve, Math.min(interval, Math.max(0, deadline - Date.now()))));
  }
}
