/**
 * The WebAssembly kernels against plain loops written here: every weight format (f32, f16, bf16,
 * MLX 4- and 8-bit with f32/f16/bf16 scales), odd sizes (tails of every SIMD block, outputs and
 * rows not multiples of 4), several quantization groups per row, half-precision subnormals and
 * infinities; and the determinism the engine's exactness rests on — a row computed alone equals
 * the same row inside a batch, and 1, 2 or 3 threads and one or two arenas give the same bits.
 */
import { afterAll, describe, expect, it } from "vitest";
import {
  Arena,
  KernelRuntime,
  type FloatKind,
  type LinearWeights,
  moveHalfSpecials,
  readRow,
  runAttention,
  runLinears,
  runSwiglu,
} from "../../src/engine/kernels/index.js";
import { ModelShard, readModelConfig, usefulThreads, type ModelConfig } from "../../src/engine/model/index.js";
import { makeTestModel } from "../../src/planner/test-model/index.js";
import { spawn, type ChildProcess } from "node:child_process";
import { mkdtemp, rm } from "node:fs/promises";
import { availableParallelism, tmpdir } from "node:os";
import { join } from "node:path";

const runtimes: KernelRuntime[] = [];
const dirs: string[] = [];
afterAll(async () => {
  await Promise.all(runtimes.map((r) => r.close()));
  for (const d of dirs) await rm(d, { recursive: true, force: true });
});

/**
 * A runtime whose workers (if any) have started and share every product, however small, so its
 * products really run on `threads` threads.
 */
async function runtime(threads: number, arenaWeightBytes?: number): Promise<KernelRuntime> {
  const r = new KernelRuntime({ threads, minSharedWork: 0, ...(arenaWeightBytes === undefined ? {} : { arenaWeightBytes }) });
  runtimes.push(r);
  await r.ready();
  expect(r.pool.workersReady()).toBe(true);
  return r;
}

/** mulberry32, so every run draws the same weights. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = Math.imul(a ^ (a >>> 15), a | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// Independent decoders.
function halfValue(bits: number): number {
  const sign = bits & 0x8000 ? -1 : 1;
  const e = (bits >> 10) & 31;
  const m = bits & 1023;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m === 0 ? sign * Infinity : NaN;
  return sign * 2 ** (e - 15) * (1 + m / 1024);
}
function bf16Value(bits: number): number {
  const view = new DataView(new ArrayBuffer(4));
  view.setUint32(0, bits << 16);
  return view.getFloat32(0);
}

/** Random half bits: mostly normal values of moderate size, some zeros and subnormals. */
function randomHalf(random: () => number): number {
  const sign = random() < 0.5 ? 0x8000 : 0;
  const roll = random();
  if (roll < 0.03) return sign;
  if (roll < 0.1) return sign | (1 + Math.floor(random() * 1023));
  return sign | ((8 + Math.floor(random() * 10)) << 10) | Math.floor(random() * 1024);
}
function randomBf16(random: () => number): number {
  return (random() < 0.5 ? 0x8000 : 0) | ((120 + Math.floor(random() * 10)) << 7) | Math.floor(random() * 128);
}

interface FloatMatrix {
  kind: FloatKind;
  out: number;
  in: number;
  bytes: Uint8Array;
  /** Decoded values, row-major. */
  values: number[];
}

function floatMatrix(kind: FloatKind, out: number, inN: number, random: () => number): FloatMatrix {
  const n = out * inN;
  if (kind === "f32") {
    const data = new Float32Array(n).map(() => (random() - 0.5) * 2);
    return { kind, out, in: inN, bytes: new Uint8Array(data.buffer), values: [...data] };
  }
  const data = new Uint16Array(n).map(() => (kind === "f16" ? randomHalf(random) : randomBf16(random)));
  return { kind, out, in: inN, bytes: new Uint8Array(data.buffer), values: [...data].map(kind === "f16" ? halfValue : bf16Value) };
}

function place(r: KernelRuntime, bytes: Uint8Array): { arena: KernelRuntime["home"]; ptr: number } {
  const spot = r.placeWeights(bytes.length);
  spot.arena.u8(spot.ptr, bytes.length).set(bytes);
  return spot;
}

function floatWeights(r: KernelRuntime, m: FloatMatrix): LinearWeights {
  const { arena, ptr } = place(r, m.bytes);
  const specials = m.kind === "f16" ? moveHalfSpecials(arena, ptr, m.out, m.in) : undefined;
  return { format: "float", kind: m.kind, out: m.out, in: m.in, arena, weight: ptr, specials };
}

interface QuantMatrix {
  bits: 4 | 8;
  groupSize: number;
  scaleKind: FloatKind;
  out: number;
  in: number;
  packed: Uint8Array;
  scales: Uint8Array;
  biases: Uint8Array;
  values: number[];
}

function quantMatrix(bits: 4 | 8, groupSize: number, scaleKind: FloatKind, out: number, inN: number, random: () => number): QuantMatrix {
  const perWord = 32 / bits;
  const words = new Uint32Array((out * inN) / perWord).map(() => Math.floor(random() * 2 ** 32));
  const groups = out * (inN / groupSize);
  const params = (): { bytes: Uint8Array; values: number[] } => {
    if (scaleKind === "f32") {
      const data = new Float32Array(groups).map(() => (random() - 0.5) * 0.1);
      return { bytes: new Uint8Array(data.buffer), values: [...data] };
    }
    const data = new Uint16Array(groups).map(() => (scaleKind === "f16" ? randomHalf(random) : randomBf16(random)));
    return { bytes: new Uint8Array(data.buffer), values: [...data].map(scaleKind === "f16" ? halfValue : bf16Value) };
  };
  const scales = params();
  const biases = params();
  const values: number[] = [];
  for (let o = 0; o < out; o++) {
    for (let i = 0; i < inN; i++) {
      const word = words[(o * inN + i - ((o * inN + i) % perWord)) / perWord] as number;
      const q = Math.floor(word / 2 ** (((o * inN + i) % perWord) * bits)) % 2 ** bits;
      const g = o * (inN / groupSize) + Math.floor(i / groupSize);
      values.push((scales.values[g] as number) * q + (biases.values[g] as number));
    }
  }
  return { bits, groupSize, scaleKind, out, in: inN, packed: new Uint8Array(words.buffer), scales: scales.bytes, biases: biases.bytes, values };
}

/** Packed words, scales and biases side by side in one arena (as the loader places them). */
function quantWeights(r: KernelRuntime, m: QuantMatrix): LinearWeights {
  const offsets = [0, Arena.footprint(m.packed.length), Arena.footprint(m.packed.length) + Arena.footprint(m.scales.length)];
  const { arena, ptr } = r.placeWeights((offsets[2] as number) + m.biases.length);
  [m.packed, m.scales, m.biases].forEach((bytes, i) => arena.u8(ptr + (offsets[i] as number), bytes.length).set(bytes));
  return {
    format: "quantized",
    bits: m.bits,
    groupSize: m.groupSize,
    out: m.out,
    in: m.in,
    arena,
    packed: ptr,
    scaleKind: m.scaleKind,
    scales: ptr + (offsets[1] as number),
    biases: ptr + (offsets[2] as number),
  };
}

/** y = W·x through the kernels, for `rows` rows of x; returns y. */
function product(r: KernelRuntime, w: LinearWeights, x: Float32Array, rows: number): Float32Array {
  const home = r.home;
  const xAt = r.buffer(home, "test-x", x.length * 4);
  home.f32(xAt, x.length).set(x);
  const yAt = r.buffer(home, "test-y", rows * w.out * 4);
  runLinears(r, [{ weights: w, x: xAt, y: yAt }], rows);
  return home.f32(yAt, rows * w.out).slice();
}

function randomInput(rows: number, inN: number, random: () => number): Float32Array {
  return new Float32Array(rows * inN).map(() => (random() - 0.5) * 4);
}

/** Plain loops in double precision; the tolerance scales with Σ|w·x| (f32 accumulation). */
function expectClose(y: Float32Array, values: number[], x: Float32Array, rows: number, out: number, inN: number): void {
  for (let r = 0; r < rows; r++) {
    for (let o = 0; o < out; o++) {
      let exact = 0;
      let magnitude = 0;
      for (let i = 0; i < inN; i++) {
        const p = (values[o * inN + i] as number) * (x[r * inN + i] as number);
        exact += p;
        magnitude += Math.abs(p);
      }
      const got = y[r * out + o] as number;
      if (Math.abs(got - exact) > 1e-5 * magnitude + 1e-30) expect.fail(`row ${r} output ${o}: ${got} vs ${exact} (Σ|w·x| ${magnitude})`);
    }
  }
}

const floatShapes: Array<[number, number]> = [
  [1, 1],
  [5, 3],
  [7, 8],
  [9, 13],
  [33, 67],
  [4, 130],
];
const rowCounts = [1, 2, 5, 9];

describe("float products against plain loops", () => {
  for (const kind of ["f32", "f16", "bf16"] as const) {
    it(`${kind}: every tail of outputs, inputs and rows`, async () => {
      const r = await runtime(1);
      const random = rng(kind.length * 7);
      for (const [out, inN] of floatShapes) {
        const m = floatMatrix(kind, out, inN, random);
        const w = floatWeights(r, m);
        for (const rows of rowCounts) {
          const x = randomInput(rows, inN, random);
          expectClose(product(r, w, x, rows), m.values, x, rows, out, inN);
        }
      }
    });
  }

  it("f16: subnormals are moved out and added back exactly; infinities propagate", async () => {
    const r = await runtime(1);
    const inN = 21;
    const bits = new Uint16Array(3 * inN);
    bits[0] = 0x3c00; // 1.0
    bits[5] = 0x0001; // the smallest subnormal, 2^-24
    bits[inN + 1] = 0x3c00;
    bits[inN + 20] = 0x83ff; // the largest negative subnormal, -1023 × 2^-24, in the tail
    bits.fill(0x3c00, 2 * inN, 3 * inN);
    bits[2 * inN + 9] = 0x7c00; // +Infinity
    const values = [...bits].map(halfValue);
    const w = floatWeights(r, { kind: "f16", out: 3, in: inN, bytes: new Uint8Array(bits.buffer), values });
    expect(w.format === "float" && w.specials?.count).toBe(3);
    const row = new Float32Array(inN).fill(1);
    row[5] = 2 ** 20;
    row[20] = 2 ** 20;
    // The matrix-vector form (1 row) and the matrix-matrix form (2 rows) alike.
    for (const rows of [1, 2]) {
      const x = new Float32Array(rows * inN);
      for (let k = 0; k < rows; k++) x.set(row, k * inN);
      const y = product(r, w, x, rows);
      for (let k = 0; k < rows; k++) {
        expect(y[k * 3]).toBe(1 + 2 ** -4);
        expect(y[k * 3 + 1]).toBe(1 - 1023 * 2 ** -4);
        expect(y[k * 3 + 2]).toBe(Infinity);
      }
    }
  });
});

describe("quantized products against plain loops", () => {
  const cases: Array<{ bits: 4 | 8; groupSize: number }> = [
    { bits: 4, groupSize: 32 },
    { bits: 4, groupSize: 64 },
    { bits: 4, groupSize: 128 },
    { bits: 8, groupSize: 16 },
    { bits: 8, groupSize: 32 },
    { bits: 8, groupSize: 64 },
  ];
  for (const { bits, groupSize } of cases) {
    for (const scaleKind of ["f16", "bf16", "f32"] as const) {
      it(`${bits}-bit, group size ${groupSize}, ${scaleKind} scales: 1 and 3 groups per row, every output and row tail`, async () => {
        const r = await runtime(1);
        const random = rng(bits * 1000 + groupSize + scaleKind.length);
        for (const groups of [1, 3]) {
          for (const out of [1, 6, 9]) {
            const m = quantMatrix(bits, groupSize, scaleKind, out, groups * groupSize, random);
            const w = quantWeights(r, m);
            for (const rows of rowCounts) {
              const x = randomInput(rows, m.in, random);
              expectClose(product(r, w, x, rows), m.values, x, rows, out, m.in);
            }
          }
        }
      });
    }
  }
});

describe("quantized products: inputs of every magnitude", () => {
  // The kernels take the inputs as integers per group, scaled to the group's largest: a group's
  // small inputs must still count as f32 would count them, a group of zeros must give zeros, and
  // an infinite or NaN input must not vanish.
  it("a group spanning 2^-60 to 2^60, a group of zeros, tiny and huge groups: within f32's error of plain loops", async () => {
    const r = await runtime(1);
    const random = rng(404);
    for (const bits of [4, 8] as const) {
      const groupSize = 32;
      const m = quantMatrix(bits, groupSize, "f16", 5, 5 * groupSize, random);
      const w = quantWeights(r, m);
      const x = new Float32Array(3 * m.in);
      for (let row = 0; row < 3; row++) {
        for (let i = 0; i < m.in; i++) {
          const group = Math.floor(i / groupSize);
          const sign = random() < 0.5 ? -1 : 1;
          // Group 0: every magnitude; 1: zeros; 2: near the smallest normal f32; 3: near the largest
          // an f32 product can hold; 4: ordinary.
          const value = [2 ** (Math.floor(random() * 121) - 60), 0, 2 ** (-120 - Math.floor(random() * 6)), 2 ** (100 + Math.floor(random() * 8)), random() - 0.5][
            group
          ] as number;
          x[row * m.in + i] = sign * value;
        }
      }
      for (const rows of [1, 3]) expectClose(product(r, w, x.subarray(0, rows * m.in), rows), m.values, x, rows, m.out, m.in);
      // Group by group, the small groups alone: their sums are not lost next to nothing.
      for (const group of [0, 2]) {
        const only = x.map((v, i) => (Math.floor((i % m.in) / groupSize) === group ? v : 0));
        expectClose(product(r, w, only, 3), m.values, only, 3, m.out, m.in);
      }
    }
  });

  it("an infinite or NaN input gives a non-finite result, as the plain loop does", async () => {
    const r = await runtime(1);
    const random = rng(405);
    const m = quantMatrix(4, 32, "f32", 3, 64, random);
    const w = quantWeights(r, m);
    for (const bad of [Infinity, -Infinity, NaN]) {
      const x = new Float32Array(m.in).map(() => random() - 0.5);
      x[40] = bad;
      for (const y of product(r, w, x, 1)) expect(Number.isFinite(y), `input ${bad} gave ${y}`).toBe(false);
    }
  });
});

describe("embedding rows are the stored values", () => {
  it("f16 (with specials), bf16, f32 and quantized rows", async () => {
    const r = await runtime(1);
    const random = rng(99);
    const check = (w: LinearWeights, values: number[]): void => {
      for (const row of [0, w.out - 1]) {
        const dst = new Float32Array(w.in + 2);
        readRow(r, w, row, dst, 1);
        expect([...dst.subarray(1, 1 + w.in)]).toEqual(values.slice(row * w.in, (row + 1) * w.in).map((v) => Math.fround(v)));
      }
    };
    for (const kind of ["f16", "bf16", "f32"] as const) {
      const m = floatMatrix(kind, 5, 37, random);
      check(floatWeights(r, m), m.values);
    }
    for (const bits of [4, 8] as const) {
      const m = quantMatrix(bits, 32, "f16", 3, 96, random);
      check(quantWeights(r, m), m.values);
    }
  });
});

describe("attention against plain loops", () => {
  it("grouped-query causal attention over a cache: head sizes with and without a whole 32-wide pass, not a multiple of 4", async () => {
    const random = rng(5);
    const heads = 6;
    const kvHeads = 2;
    for (const headDim of [8, 10, 32, 40]) {
      const r = await runtime(1);
      const start = 4;
      const rows = 3;
      const positions = start + rows;
      const q = new Float32Array(rows * heads * headDim).map(() => random() - 0.5);
      const keys = new Float32Array(positions * kvHeads * headDim).map(() => random() - 0.5);
      const values = new Float32Array(positions * kvHeads * headDim).map(() => random() - 0.5);
      const out = attend(r, q, keys, values, rows, start, heads, kvHeads, headDim);
      for (let row = 0; row < rows; row++) {
        for (let h = 0; h < heads; h++) {
          const kv = Math.floor(h / (heads / kvHeads));
          const scores: number[] = [];
          for (let j = 0; j <= start + row; j++) {
            let dot = 0;
            for (let i = 0; i < headDim; i++) dot += (q[(row * heads + h) * headDim + i] as number) * (keys[(j * kvHeads + kv) * headDim + i] as number);
            scores.push(dot / Math.sqrt(headDim));
          }
          const max = Math.max(...scores);
          const e = scores.map((s) => Math.exp(s - max));
          const z = e.reduce((a, b) => a + b, 0);
          for (let i = 0; i < headDim; i++) {
            const expected = e.reduce((s, w, j) => s + (w / z) * (values[(j * kvHeads + kv) * headDim + i] as number), 0);
            expect(Math.abs((out[(row * heads + h) * headDim + i] as number) - expected)).toBeLessThan(1e-6);
          }
        }
      }
    }
  });
});

describe("SwiGLU against a plain loop", () => {
  it("silu(gate) × up, in place, for counts that are and are not a multiple of 4, on 1 and 3 threads", async () => {
    const random = rng(9);
    for (const count of [1, 7, 64, 1001, 3 * 1536 + 3]) {
      // Wide inputs: saturated and vanishing exponentials both.
      const gate = new Float32Array(count).map(() => (random() - 0.5) * 40);
      const up = new Float32Array(count).map(() => random() - 0.5);
      const expected = Float32Array.from(gate, (g, i) => (g / (1 + Math.exp(-g))) * (up[i] as number));
      const one = activate(await runtime(1), gate, up);
      const three = activate(await runtime(3), gate, up);
      expect(three).toEqual(one);
      for (let i = 0; i < count; i++) {
        // The kernel's exponential is not V8's: within one f32 step of the plain loop.
        const e = expected[i] as number;
        expect(Math.abs((one[i] as number) - e), `${count}: element ${i}`).toBeLessThanOrEqual(Math.abs(e) * 2 ** -23);
      }
    }
  });
});

function activate(r: KernelRuntime, gate: Float32Array, up: Float32Array): Float32Array {
  const home = r.home;
  const g = r.buffer(home, "test-gate", gate.length * 4);
  const u = r.buffer(home, "test-up", up.length * 4);
  home.f32(g, gate.length).set(gate);
  home.f32(u, up.length).set(up);
  runSwiglu(r, { gate: g, up: u, count: gate.length });
  return home.f32(g, gate.length).slice();
}

function attend(
  r: KernelRuntime,
  q: Float32Array,
  keys: Float32Array,
  values: Float32Array,
  rows: number,
  start: number,
  heads: number,
  kvHeads: number,
  headDim: number,
): Float32Array {
  const home = r.home;
  const at = (name: string, data: Float32Array): number => {
    const ptr = r.buffer(home, name, data.length * 4);
    home.f32(ptr, data.length).set(data);
    return ptr;
  };
  const out = r.buffer(home, "test-attn", q.length * 4);
  runAttention(r, { q: at("test-q", q), keys: at("test-k", keys), values: at("test-v", values), out, rows, start, heads, kvHeads, headDim });
  return home.f32(out, q.length).slice();
}

describe("kernel threads a model can use", () => {
  it("none for a model whose largest product is under 512 × 512 multiply-adds; as asked otherwise", () => {
    const config = (hiddenSize: number, intermediateSize: number, vocabSize: number): ModelConfig => ({
      ...({} as ModelConfig),
      hiddenSize,
      intermediateSize,
      vocabSize,
    });
    expect(usefulThreads(config(64, 128, 320), 8)).toBe(1);
    expect(usefulThreads(config(256, 512, 512), 8)).toBe(8);
    expect(usefulThreads(config(64, 128, 4096), 8)).toBe(8);
  });
});

describe("arena allocation", () => {
  it("reuses released blocks, first fit, merging neighbours, and grows the memory only past its end", async () => {
    const arena = (await runtime(1)).home;
    const a = arena.alloc(1000);
    const b = arena.alloc(64);
    const c = arena.alloc(5000);
    const top = arena.usedBytes;
    expect([b - a, c - b]).toEqual([1024, 64]);
    arena.release(a, 1000);
    arena.release(b, 64);
    // a and b merged: 1088 bytes from a's address.
    expect(arena.alloc(1088)).toBe(a);
    arena.release(a, 1088);
    expect(arena.alloc(100)).toBe(a);
    expect(arena.alloc(900)).toBe(a + 128);
    expect(arena.usedBytes).toBe(top);
    expect(arena.alloc(64)).toBe(top);
    arena.u8(c, 5000).fill(7);
    expect(arena.f32(c, 1)[0]).not.toBe(0);
  });
});

describe("results do not depend on batch, threads or arenas", () => {
  const formats: Array<{ name: string; make: (random: () => number) => FloatMatrix | QuantMatrix }> = [
    { name: "f32", make: (random) => floatMatrix("f32", 37, 45, random) },
    { name: "f16", make: (random) => floatMatrix("f16", 37, 45, random) },
    { name: "bf16", make: (random) => floatMatrix("bf16", 37, 45, random) },
    { name: "4-bit", make: (random) => quantMatrix(4, 64, "f16", 37, 128, random) },
    { name: "8-bit", make: (random) => quantMatrix(8, 32, "bf16", 37, 96, random) },
  ];
  const weightsOf = (r: KernelRuntime, m: FloatMatrix | QuantMatrix): LinearWeights => ("kind" in m ? floatWeights(r, m) : quantWeights(r, m));

  for (const f of formats) {
    it(`${f.name}: a row alone == that row in a batch of 7; 1 == 2 == 3 threads; one arena == weights in a second arena`, async () => {
      const m = f.make(rng(f.name.length));
      const x = randomInput(7, m.in, rng(3));
      const one = await runtime(1);
      const batch = product(one, weightsOf(one, m), x, 7);
      const w = weightsOf(one, m);
      for (let row = 0; row < 7; row++) {
        const alone = product(one, w, x.subarray(row * m.in, (row + 1) * m.in), 1);
        expect(alone).toEqual(batch.subarray(row * m.out, (row + 1) * m.out));
      }
      for (const threads of [2, 3]) {
        const many = await runtime(threads);
        const wm = weightsOf(many, m);
        expect(product(many, wm, x, 7)).toEqual(batch);
        expect(product(many, wm, x.subarray(0, m.in), 1)).toEqual(batch.subarray(0, m.out));
      }
      // A budget of one byte per arena: the first weights open arena 0, the next ones arena 1.
      const split = await runtime(2, 1);
      weightsOf(split, m);
      const far = weightsOf(split, m);
      expect(far.arena.index).toBeGreaterThan(0);
      expect(product(split, far, x, 7)).toEqual(batch);
    });
  }

  it("attention: 1 == 3 threads", async () => {
    const random = rng(11);
    const q = new Float32Array(5 * 4 * 16).map(() => random() - 0.5);
    const kv = new Float32Array(9 * 2 * 16).map(() => random() - 0.5);
    const vv = new Float32Array(9 * 2 * 16).map(() => random() - 0.5);
    expect(attend(await runtime(3), q, kv, vv, 5, 4, 4, 2, 16)).toEqual(attend(await runtime(1), q, kv, vv, 5, 4, 4, 2, 16));
  });

  for (const variant of [
    { name: "f16", options: { dtype: "f16" as const, seed: 21 } },
    { name: "4-bit", options: { quantize: 4 as const, seed: 22 } },
  ]) {
    it(`${variant.name} model: a 300-token prompt in one call (ten chunks; the KV cache grows past its first 256 positions) == token by token, on 1 and 3 threads, weights in one arena or many`, async () => {
      const dir = await mkdtemp(join(tmpdir(), "engine-kernels-"));
      dirs.push(dir);
      await makeTestModel(dir, { layers: 2, hidden: 64, heads: 4, kvHeads: 2, vocab: 300, ...variant.options });
      const config = readModelConfig(dir);
      const tokens = Array.from({ length: 300 }, (_, i) => (i * 37) % 300);
      // What the pool did in the last run (chunks taken over, sharing paused): said when a run differs.
      let pool = "";
      const run = async (threads: number, stepwise: boolean, arenaWeightBytes?: number): Promise<Float32Array[]> => {
        const shard = ModelShard.load(
          dir,
          config,
          { start: 0, end: config.layers },
          { threads, minSharedWork: 0, ...(arenaWeightBytes === undefined ? {} : { arenaWeightBytes }) },
        );
        await shard.ready();
        const cache = shard.createCache();
        const out: Float32Array[] = [];
        if (stepwise) {
          for (const t of tokens) {
            const hidden = shard.embed([t]);
            shard.forward(cache, hidden, 1);
            out.push(shard.logits(hidden, 0));
          }
        } else {
          const hidden = shard.embed(tokens);
          shard.forward(cache, hidden, tokens.length);
          for (let row = 0; row < tokens.length; row++) out.push(shard.logits(hidden, row));
        }
        pool = `threads ${threads}, stepwise ${stepwise}: ${shard.stolenChunks} chunks taken over, sharing paused ${shard.sharingPauses} times`;
        await shard.close();
        return out;
      };
      const reference = await run(1, false);
      expect(await run(1, true), pool).toEqual(reference);
      expect(await run(3, false), pool).toEqual(reference);
      expect(await run(3, true), pool).toEqual(reference);
      // 16 KiB of weights per arena: every linear after the first in an arena of its own, away from the activations and caches.
      expect(await run(2, false, 16 * 1024), pool).toEqual(reference);
    });
  }
});

describe("a busy machine", () => {
  it("per-thread scratch keeps each thread's slot in place across jobs of other sizes, so a late worker writes only its own", async () => {
    // A worker descheduled mid-chunk still writes into its slot, laid out for its old job, while
    // later jobs run: with a stride taken from each job, a smaller job's slots would overlap it.
    const r = await runtime(3);
    const first = r.threadSlots(r.home, "test-slots", 1000);
    expect(first.stride).toBeGreaterThanOrEqual(1000);
    expect(r.threadSlots(r.home, "test-slots", 200)).toEqual(first);
    // A larger need gets a new block, clear of the old one (which a late worker may still use).
    const grown = r.threadSlots(r.home, "test-slots", 5000);
    expect(grown.stride).toBeGreaterThanOrEqual(5000);
    expect(grown.base >= first.base + 3 * first.stride || grown.base + 3 * grown.stride <= first.base).toBe(true);
    expect(r.threadSlots(r.home, "test-slots", 1000)).toEqual(grown);
  });

  it("chunks a descheduled kernel thread still holds are taken over, and the logits stay the same bits", async () => {
    const dir = await mkdtemp(join(tmpdir(), "engine-kernels-busy-"));
    dirs.push(dir);
    await makeTestModel(dir, { layers: 2, hidden: 256, heads: 4, kvHeads: 2, intermediate: 768, vocab: 300, dtype: "f16", seed: 23 });
    const config = readModelConfig(dir);
    const range = { start: 0, end: config.layers };
    const alone = ModelShard.load(dir, config, range, { threads: 1 });
    // Every product shared, even while sharing costs time (under the hogs below the judge would keep
    // most jobs on the caller, and a job that is not shared has no chunk to take over).
    const shared = ModelShard.load(dir, config, range, { threads: 2, minSharedWork: 0, judgeSharing: false });
    await shared.ready();
    // Twice as many busy processes as cores: the machine deschedules the kernel thread mid-chunk.
    const hogs: ChildProcess[] = Array.from({ length: 2 * availableParallelism() }, () =>
      spawn(process.execPath, ["-e", "const end = Date.now() + 60000; while (Date.now() < end);"], { stdio: "ignore" }),
    );
    try {
      // Rounds until a chunk was taken over, for up to 60 s: how soon the scheduler steps in depends on
      // the machine's load (0.4–30 s here, with more busy processes than the hogs beside them).
      const deadline = Date.now() + 60_000;
      for (let round = 0; (round < 8 || Date.now() < deadline) && shared.stolenChunks === 0; round++) {
        const [a, b] = [alone.createCache(), shared.createCache()];
        for (let t = 0; t < 60; t++) {
          const [ha, hb] = [alone.embed([(t * 7) % 300]), shared.embed([(t * 7) % 300])];
          alone.forward(a, ha, 1);
          shared.forward(b, hb, 1);
          expect(shared.logits(hb, 0)).toEqual(alone.logits(ha, 0));
        }
        alone.releaseCache(a);
        shared.releaseCache(b);
      }
      expect(shared.stolenChunks).toBeGreaterThan(0);
    } finally {
      for (const hog of hogs) hog.kill();
      await Promise.all([alone.close(), shared.close()]);
    }
  }, 120_000);
});
