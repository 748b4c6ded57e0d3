/**
 * The engine's compute kernels: WebAssembly SIMD products over weights in their stored format
 * (f32, f16, bf16, MLX 4/8-bit), attention, and the threads and shared memory they run in.
 *
 * Why WebAssembly (compiled from AssemblyScript in ./assembly at `npm run build`): it is the one
 * route to SIMD and shared-memory threads that runs wherever Node.js runs — x86 and Arm, Linux and
 * macOS — from a single build artefact, with nothing to compile on a node (no native addon, no
 * node-gyp, no C toolchain, no per-platform prebuilt binaries), and with IEEE semantics fixed by
 * the specification, so every machine of a pipeline computes the same bits. AssemblyScript is a
 * TypeScript dialect with an npm-only compiler, so the kernels are written, reviewed and built
 * like the rest of the engine. The cost: 128-bit vectors and no fused multiply-add (relaxed SIMD
 * is neither on by default in Node.js 20 nor deterministic across machines), and 4 GiB per memory,
 * which arenas get around.
 */
export { KernelRuntime, type RuntimeOptions } from "./runtime.js";
export { minSharedWork } from "./thread-pool.js";
export { kernelModule } from "./kernel-module.js";
export { Arena } from "./arena.js";
export {
  floatKindBytes,
  linearBytes,
  moveHalfSpecials,
  readRow,
  runAttention,
  runSwiglu,
  runLinears,
  type FloatKind,
  type LinearCall,
  type LinearWeights,
  type MovedSpecials,
} from "./linear.js";
