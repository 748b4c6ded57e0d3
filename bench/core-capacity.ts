/**
 * How many cores' worth of work this machine gives right now: the same compute-bound kernel run on
 * one thread, then on `threads` threads at once with nothing shared between them, and the ratio of
 * the second's total rate to the first's. On a machine of its own it is the core count; on a
 * shared virtual machine (a neighbour busy on a sibling hyperthread, a vCPU descheduled by the
 * host) it is less, and no program can beat it. It is the same-run baseline for every "all cores
 * over one" figure: a thread pool that scales 1.6× on a machine that gives 1.7 is doing well, one
 * that scales 1.6× on a machine that gives 2 is not.
 */
import { Worker } from "node:worker_threads";
import { kernelModule } from "../src/engine/kernels/index.js";

/**
 * The kernel each thread runs: an f32 matrix-vector product over 512 KiB of weights (128 × 1024),
 * which stays in a core's L2 cache, so the figure is the cores' arithmetic, not the memory bus
 * they share (the bound figures measure that).
 */
const workerSource = `
const { parentPort, workerData } = require("node:worker_threads");
const memory = new WebAssembly.Memory({ initial: 16, maximum: 16, shared: true });
const k = new WebAssembly.Instance(workerData.module, { env: { memory, abort() { throw new Error("kernel aborted"); } } }).exports;
const inN = 1024, out = 128, w = 65536, x = w + inN * out * 4, y = x + inN * 4;
new Float32Array(memory.buffer, w, inN * out).fill(0.25);
new Float32Array(memory.buffer, x, inN).fill(0.5);
parentPort.on("message", (ms) => {
  k.linearF32(w, x, y, 1, inN, out, 0, out);
  const start = performance.now();
  let passes = 0;
  while (performance.now() - start < ms) {
    for (let i = 0; i < 16; i++) k.linearF32(w, x, y, 1, inN, out, 0, out);
    passes += 16;
  }
  parentPort.postMessage(passes / ((performance.now() - start) / 1000));
});
`;

export class CoreCapacity {
  private constructor(private readonly workers: Worker[]) {}

  /** `threads` idle worker threads, ready to measure. */
  static start(threads: number): CoreCapacity {
    const module = kernelModule();
    return new CoreCapacity(Array.from({ length: threads }, () => new Worker(workerSource, { eval: true, workerData: { module } })));
  }

  /** Total passes/s of `workers` running together for `ms`. */
  private async rate(workers: Worker[], ms: number): Promise<number> {
    const rates = await Promise.all(
      workers.map(
        (w) =>
          new Promise<number>((resolve, reject) => {
            const fail = (error: Error): void => reject(error);
            w.once("message", (rate: number) => {
              w.off("error", fail);
              resolve(rate);
            });
            w.once("error", fail);
            w.postMessage(ms);
          }),
      ),
    );
    return rates.reduce((sum, r) => sum + r, 0);
  }

  /**
   * Cores' worth of work the machine gives now: all threads' rate together ÷ one thread's alone,
   * each over `ms` (default 200). One thread's rate is the mean of every thread alone, before and
   * after they run together: the cores of a shared machine differ and drift, and one thread timed
   * once on its slower core would make the machine seem to give more cores than it has.
   */
  async coresOverOne(ms = 200): Promise<number> {
    const alone = async (): Promise<number[]> => {
      const rates: number[] = [];
      for (const w of this.workers) rates.push(await this.rate([w], ms));
      return rates;
    };
    const before = await alone();
    const all = await this.rate(this.workers, ms);
    const ones = [...before, ...(await alone())];
    return all / (ones.reduce((sum, r) => sum + r, 0) / ones.length);
  }

  close(): Promise<number[]> {
    return Promise.all(this.workers.map((w) => w.terminate()));
  }
}
