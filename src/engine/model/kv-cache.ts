/** One sequence's key/value cache on one stage: f32 per layer, grown by doubling up to the context limit. */

export class SequenceCache {
  /** Positions already stored. */
  length = 0;
  keys: Float32Array[];
  values: Float32Array[];
  private capacity: number;

  constructor(
    layers: number,
    /** kv_heads × head_dim, floats per position. */
    private readonly width: number,
    /** Context limit, positions. */
    readonly maxPositions: number,
    /** Positions allocated up front; grows by doubling. Default 16. */
    initialCapacity = 16,
  ) {
    this.capacity = Math.min(initialCapacity, maxPositions);
    this.keys = Array.from({ length: layers }, () => new Float32Array(this.capacity * width));
    this.values = Array.from({ length: layers }, () => new Float32Array(this.capacity * width));
  }

  /** Make room for `positions` positions in total. */
  reserve(positions: number): void {
    if (positions > this.maxPositions) throw new Error(`context of ${positions} tokens exceeds the limit of ${this.maxPositions}`);
    if (positions <= this.capacity) return;
    let next = this.capacity;
    while (next < positions) next *= 2;
    next = Math.min(next, this.maxPositions);
    const grow = (old: Float32Array): Float32Array => {
      const bigger = new Float32Array(next * this.width);
      bigger.set(old.subarray(0, this.length * this.width));
      return bigger;
    };
    this.keys = this.keys.map(grow);
    this.values = this.values.map(grow);
    this.capacity = next;
  }

  /** Forget every position, keeping the allocated memory for the next sequence. */
  reset(): void {
    this.length = 0;
  }

  /** Bytes held. */
  bytes(): number {
    return 2 * this.keys.length * this.capacity * this.width * 4;
  }
}
