// shard-engine's compute kernels, in AssemblyScript, compiled to WebAssembly with SIMD by asc at
// `npm run build` (../index.ts says why WebAssembly). Every function takes byte addresses in the
// one linear memory it is instantiated with — shared by all threads of a stage — and allocates
// nothing.
export { prepareHalf, prepareQuant } from "./prepare";
export { linearF32 } from "./single";
export { linearBf16, linearF16 } from "./half";
export { linearQ4, linearQ8 } from "./quant";
export { attention } from "./attention";
export { swiglu } from "./activation";
export { countHalfSpecials, extractHalfSpecials } from "./specials";
export { readRowFloat, readRowQuant } from "./rows";
