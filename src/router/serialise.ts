/**
 * Runs async jobs one at a time per key (an absolute file path), in call order, so two registrations
 * in one process never read the same old file and lose each other's edit. Other processes are not
 * covered: shardctl is the only writer of its entries, one daemon per config.
 */
const tails = new Map<string, Promise<unknown>>();

export function serialise<T>(key: string, job: () => Promise<T>): Promise<T> {
  const previous = tails.get(key) ?? Promise.resolve();
  const result = previous.then(job, job);
  const tail = result.catch(() => undefined);
  tails.set(key, tail);
  // Forget the key once idle so the map does not grow with every file ever touched.
  void tail.then(() => {
    if (tails.get(key) === tail) tails.delete(key);
  });
  return result;
}
