/**
 * An arena: one shared WebAssembly memory (visible to every thread of the stage) and its
 * allocator. wasm32 addresses reach 4 GiB, so a stage whose weights exceed one arena's budget
 * spreads them over several; each arena has its own kernel instance per thread.
 */
import { instantiateKernels, type KernelExports } from "./kernel-module.js";

/** WebAssembly page, bytes. */
const pageBytes = 65536;
/** The most pages one memory may have (wasm32: 4 GiB). */
const maxPages = 65536;
// The module's constants (the exp table) live in the first page; nothing is allocated there.
const reservedBytes = pageBytes;
/** Allocation alignment, bytes: a cache line, so no two threads' outputs share one. */
const alignBytes = 64;

const roundUp = (n: number, to: number): number => Math.ceil(n / to) * to;

export class Arena {
  readonly memory: WebAssembly.Memory;
  /** The kernels instantiated over this memory on the calling (main) thread. */
  readonly kernels: KernelExports;
  /** End of the bump region, bytes. */
  private top = reservedBytes;
  /** Freed blocks, by address, never adjacent (merged on release). */
  private readonly freeBlocks: Array<{ ptr: number; bytes: number }> = [];

  constructor(
    /** Index of this arena among the stage's arenas (tasks name arenas by it). */
    readonly index: number,
    module: WebAssembly.Module,
  ) {
    // Shared memories reserve their maximum address range up front, so growing never moves
    // them and views taken earlier stay valid.
    this.memory = new WebAssembly.Memory({ initial: 1, maximum: maxPages, shared: true });
    this.kernels = instantiateKernels(module, this.memory);
  }

  /** The most bytes this arena can address. */
  static readonly capacityBytes = maxPages * pageBytes;

  /** Bytes up to the end of the last allocation. */
  get usedBytes(): number {
    return this.top;
  }

  /** Bytes an allocation of `bytes` takes (rounded to the alignment). */
  static footprint(bytes: number): number {
    return roundUp(Math.max(bytes, 1), alignBytes);
  }

  /** Allocate `bytes` (64-byte aligned; new memory reads as zero, reused memory does not). */
  alloc(bytes: number): number {
    const size = Arena.footprint(bytes);
    const fit = this.freeBlocks.findIndex((b) => b.bytes >= size);
    if (fit >= 0) {
      const block = this.freeBlocks[fit] as { ptr: number; bytes: number };
      const ptr = block.ptr;
      if (block.bytes === size) this.freeBlocks.splice(fit, 1);
      else {
        block.ptr += size;
        block.bytes -= size;
      }
      return ptr;
    }
    const ptr = this.top;
    const end = ptr + size;
    if (end > Arena.capacityBytes) throw new Error(`arena ${this.index}: ${size} more bytes exceed WebAssembly's 4 GiB address space`);
    const pages = Math.ceil(end / pageBytes);
    const have = this.memory.buffer.byteLength / pageBytes;
    if (pages > have) this.memory.grow(pages - have);
    this.top = end;
    return ptr;
  }

  /** Return a block from `alloc(bytes)` for reuse. */
  release(ptr: number, bytes: number): void {
    const size = Arena.footprint(bytes);
    let i = this.freeBlocks.findIndex((b) => b.ptr > ptr);
    if (i < 0) i = this.freeBlocks.length;
    this.freeBlocks.splice(i, 0, { ptr, bytes: size });
    // Merge with the following block, then with the preceding one.
    const next = this.freeBlocks[i + 1];
    const self = this.freeBlocks[i] as { ptr: number; bytes: number };
    if (next !== undefined && self.ptr + self.bytes === next.ptr) {
      self.bytes += next.bytes;
      this.freeBlocks.splice(i + 1, 1);
    }
    const prev = this.freeBlocks[i - 1];
    if (prev !== undefined && prev.ptr + prev.bytes === self.ptr) {
      prev.bytes += self.bytes;
      this.freeBlocks.splice(i, 1);
    }
  }

  f32(ptr: number, length: number): Float32Array {
    return new Float32Array(this.memory.buffer, ptr, length);
  }

  u8(ptr: number, length: number): Uint8Array {
    return new Uint8Array(this.memory.buffer, ptr, length);
  }

  /** Copy `bytes` from `from` in `source` to `to` in this arena. */
  copyFrom(source: Arena, from: number, to: number, bytes: number): void {
    if (source === this) this.u8(0, this.memory.buffer.byteLength).copyWithin(to, from, from + bytes);
    else this.u8(to, bytes).set(source.u8(from, bytes));
  }
}
