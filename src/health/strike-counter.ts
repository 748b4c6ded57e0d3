/**
 * Consecutive-failure counting per check, so one lost packet or one slow answer does not kill a
 * cluster: a check fails the cluster only after `limit` failures in a row; any success resets it.
 */
export class StrikeCounter {
  private readonly counts = new Map<string, number>();

  constructor(private readonly limit: number) {}

  /** Record a failure of `key`; true once it has failed `limit` times in a row. */
  strike(key: string): boolean {
    const count = (this.counts.get(key) ?? 0) + 1;
    this.counts.set(key, count);
    return count >= this.limit;
  }

  clear(key: string): void {
    this.counts.delete(key);
  }

  count(key: string): number {
    return this.counts.get(key) ?? 0;
  }
}
