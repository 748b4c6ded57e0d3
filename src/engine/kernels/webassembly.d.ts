// The part of the WebAssembly JavaScript API the kernels use. TypeScript declares it only in its
// DOM libraries, which this Node.js project does not load.
export {};

declare global {
  namespace WebAssembly {
    class Module {
      constructor(bytes: Uint8Array);
    }
    class Instance {
      constructor(module: Module, imports?: Record<string, Record<string, unknown>>);
      readonly exports: Record<string, unknown>;
    }
    interface MemoryDescriptor {
      initial: number;
      maximum?: number;
      shared?: boolean;
    }
    class Memory {
      constructor(descriptor: MemoryDescriptor);
      readonly buffer: ArrayBuffer | SharedArrayBuffer;
      grow(delta: number): number;
    }
  }
}
