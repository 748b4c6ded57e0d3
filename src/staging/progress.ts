/** Per-node progress: bytes done/total, rate over the transfer so far, ETA at that rate. */
import type { StagingProgress } from "./types.js";

export function createProgress(node: string, bytesTotal: number, emit: ((event: StagingProgress) => void) | undefined) {
  const started = performance.now();
  let bytesDone = 0;
  let lastEmit = 0;
  return {
    /** Record `bytes` more done; events at most every 200 ms unless forced. */
    update(phase: StagingProgress["phase"], delta: number, file?: string, force = false, holder?: string): void {
      bytesDone += delta;
      const now = performance.now();
      if (emit === undefined || (!force && now - lastEmit < 200)) return;
      lastEmit = now;
      const seconds = (now - started) / 1000;
      const rate = seconds > 0 ? bytesDone / seconds : 0;
      emit({
        node,
        phase,
        file,
        ...(holder === undefined ? {} : { holder }),
        bytesDone,
        bytesTotal,
        rateBytesPerSec: Math.round(rate),
        etaSec: rate > 0 ? Math.max(0, (bytesTotal - bytesDone) / rate) : undefined,
      });
    },
    get bytesDone(): number {
      return bytesDone;
    },
  };
}
