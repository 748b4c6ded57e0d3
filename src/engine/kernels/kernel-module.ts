/**
 * The compiled kernels (kernels.wasm, built from ./assembly by `npm run build`) and their typed
 * exports. The module is compiled once per thread; every instance imports the linear memory of
 * the arena it computes in.
 */
import { existsSync, readFileSync } from "node:fs";
import { builtFile } from "../built-file.js";

/** Byte addresses and sizes are passed as numbers; wasm i32 parameters read them as u32. */
export interface KernelExports {
  prepareHalf(x: number, rows: number, inN: number, dst: number, halfPrecision: number): void;
  prepareQuant(x: number, rows: number, inN: number, bits: number, groupSize: number, dst: number, sums: number): void;
  linearF32(w: number, x: number, y: number, rows: number, inN: number, outN: number, oStart: number, oEnd: number): void;
  linearF16(
    w: number,
    xp: number,
    x: number,
    y: number,
    rows: number,
    inN: number,
    outN: number,
    oStart: number,
    oEnd: number,
    panel: number,
    rowPtr: number,
    entries: number,
  ): void;
  linearBf16(
    w: number,
    xp: number,
    x: number,
    y: number,
    rows: number,
    inN: number,
    outN: number,
    oStart: number,
    oEnd: number,
    panel: number,
    rowPtr: number,
    entries: number,
  ): void;
  linearQ4(
    w: number,
    scaleKind: number,
    scales: number,
    biases: number,
    groupSize: number,
    xp: number,
    sums: number,
    y: number,
    rows: number,
    inN: number,
    outN: number,
    oStart: number,
    oEnd: number,
    panel: number,
  ): void;
  linearQ8(
    w: number,
    scaleKind: number,
    scales: number,
    biases: number,
    groupSize: number,
    xp: number,
    sums: number,
    y: number,
    rows: number,
    inN: number,
    outN: number,
    oStart: number,
    oEnd: number,
    panel: number,
  ): void;
  attention(
    q: number,
    keys: number,
    values: number,
    out: number,
    start: number,
    heads: number,
    kvHeads: number,
    headDim: number,
    scale: number,
    scores: number,
    tStart: number,
    tEnd: number,
  ): void;
  swiglu(gate: number, up: number, out: number, start: number, end: number): void;
  countHalfSpecials(w: number, rows: number, cols: number, rowPtr: number): number;
  extractHalfSpecials(w: number, rows: number, cols: number, entries: number): void;
  readRowFloat(kind: number, w: number, inN: number, row: number, dst: number, rowPtr: number, entries: number): void;
  readRowQuant(bits: number, w: number, scaleKind: number, scales: number, biases: number, groupSize: number, inN: number, row: number, dst: number): void;
}

/**
 * Where kernels.wasm is: beside this module in the build. Run from source (vitest, tsx) this
 * module sits in src/, where nothing is compiled, so the build's copy is used.
 */
export function kernelWasmPath(): string {
  return builtFile(import.meta.url, "./kernels.wasm");
}

let compiled: WebAssembly.Module | undefined;

/** The compiled kernel module (compiled on first use; synchronous, a few milliseconds). */
export function kernelModule(): WebAssembly.Module {
  if (compiled === undefined) {
    const path = kernelWasmPath();
    if (!existsSync(path)) throw new Error(`${path} is missing: \`npm run build\` compiles the engine's WebAssembly kernels`);
    compiled = new WebAssembly.Module(readFileSync(path));
  }
  return compiled;
}

/** Instantiate the kernels over `memory` (a shared WebAssembly.Memory). */
export function instantiateKernels(module: WebAssembly.Module, memory: WebAssembly.Memory): KernelExports {
  const instance = new WebAssembly.Instance(module, {
    env: {
      memory,
      abort: () => {
        throw new Error("kernel aborted");
      },
    },
  });
  return instance.exports as unknown as KernelExports;
}
