/** `work`'s value, or `fallback` when it fails or takes longer than `ms`: for evidence worth a bounded wait, never a failure. */
export async function within<T, F>(ms: number, work: Promise<T>, fallback: F): Promise<T | F> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([work.catch(() => fallback), new Promise<F>((resolve) => (timer = setTimeout(() => resolve(fallback), ms)))]);
  } finally {
    clearTimeout(timer);
  }
}
