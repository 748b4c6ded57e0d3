/**
 * One sequence's key/value cache on one stage: f32, in the home arena (where the attention kernel
 * reads it), one block laid out [layer][keys | values][position][kv_heads × head_dim], grown by
 * doubling up to the context limit.
 */
import type { Arena } from "../kernels/index.js";

export class SequenceCache {
  /** Positions already stored. */
  length = 0;
  private capacity: number;
  private ptr: number;

  constructor(
    private readonly arena: Arena,
    readonly layers: number,
    /** kv_heads × head_dim, floats per position. */
    private readonly width: number,
    /** Context limit, positions. */
    readonly maxPositions: number,
    /** Positions allocated up front; grows by doubling. Default 16. */
    initialCapacity = 16,
  ) {
    this.capacity = Math.min(initialCapacity, maxPositions);
    this.ptr = arena.alloc(this.blockBytes(this.capacity));
  }

  private blockBytes(capacity: number): number {
    return 2 * this.layers * capacity * this.width * 4;
  }

  /** Address of layer `layer`'s keys (`capacity × width` f32). */
  keysAt(layer: number): number {
    return this.ptr + 2 * layer * this.capacity * this.width * 4;
  }

  /** Address of layer `layer`'s values. */
  valuesAt(layer: number): number {
    return this.keysAt(layer) + this.capacity * this.width * 4;
  }

  /** Layer `layer`'s keys as f32 (valid until the next reserve). */
  keys(layer: number): Float32Array {
    return this.arena.f32(this.keysAt(layer), this.capacity * this.width);
  }

  values(layer: number): Float32Array {
    return this.arena.f32(this.valuesAt(layer), this.capacity * this.width);
  }

  /** Make room for `positions` positions in total. */
  reserve(positions: number): void {
    if (positions > this.maxPositions) throw new Error(`context of ${positions} tokens exceeds the limit of ${this.maxPositions}`);
    if (positions <= this.capacity) return;
    let next = this.capacity;
    while (next < positions) next *= 2;
    next = Math.min(next, this.maxPositions);
    const old = { ptr: this.ptr, capacity: this.capacity };
    const stored = this.length * this.width * 4;
    const ptr = this.arena.alloc(this.blockBytes(next));
    for (let part = 0; part < 2 * this.layers; part++) {
      this.arena.copyFrom(this.arena, old.ptr + part * old.capacity * this.width * 4, ptr + part * next * this.width * 4, stored);
    }
    this.arena.release(old.ptr, this.blockBytes(old.capacity));
    this.ptr = ptr;
    this.capacity = next;
  }

  /** Forget every position, keeping the allocated memory for the next sequence. */
  reset(): void {
    this.length = 0;
  }

  /** Give the memory back to the arena; the cache is unusable afterwards. */
  free(): void {
    this.arena.release(this.ptr, this.blockBytes(this.capacity));
    this.capacity = 0;
    this.length = 0;
  }

  /** Bytes held. */
  bytes(): number {
    return this.blockBytes(this.capacity);
  }
}
