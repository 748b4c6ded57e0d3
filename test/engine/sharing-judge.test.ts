import { describe, expect, it } from "vitest";
import { judgedJobs, maxPauseMs, minPauseMs, SharingJudge } from "../../src/engine/kernels/sharing-judge.js";

/** Record one window of jobs at `now`, each saving `savedMs` (negative: costing). */
function window(judge: SharingJudge, savedMs: (job: number) => number, now: number): void {
  for (let job = 0; job < judgedJobs; job++) judge.record(savedMs(job), now);
}

describe("whether sharing products with kernel threads pays", () => {
  it("keeps sharing when a worker is now and then late but its chunks save the caller time overall", () => {
    const judge = new SharingJudge();
    // Four of sixteen jobs waited out a late worker (1 ms lost each); the rest saved 0.5 ms each.
    for (let w = 0; w < 5; w++) window(judge, (job) => (job % 5 === 0 ? -1 : 0.5), w * 10);
    expect(judge.pauses).toBe(0);
    expect(judge.paused(50)).toBe(false);
  });

  it("pauses when a window saved no time, doubling the pause with each such window in a row", () => {
    const judge = new SharingJudge();
    const pauses: number[] = [];
    let now = 0;
    for (let w = 0; w < 8; w++) {
      window(judge, () => -0.1, now);
      let until = now;
      while (judge.paused(until)) until++;
      pauses.push(until - now);
      now = until;
    }
    expect(pauses).toEqual([minPauseMs, 2 * minPauseMs, 4 * minPauseMs, 8 * minPauseMs, 16 * minPauseMs, 32 * minPauseMs, maxPauseMs, maxPauseMs]);
    expect(judge.pauses).toBe(8);
  });

  it("judges only whole windows, and one that saved time ends the doubling", () => {
    const judge = new SharingJudge();
    for (let job = 0; job < judgedJobs - 1; job++) judge.record(-5, 0);
    expect(judge.paused(0)).toBe(false);
    judge.record(-5, 0);
    expect(judge.paused(minPauseMs - 1)).toBe(true);
    window(judge, () => -1, minPauseMs);
    expect(judge.paused(minPauseMs + 2 * minPauseMs - 1)).toBe(true);
    window(judge, () => 1, 1000);
    expect(judge.paused(1000)).toBe(false);
    window(judge, () => -1, 2000);
    // Back to the shortest pause.
    expect(judge.paused(2000 + minPauseMs - 1)).toBe(true);
    expect(judge.paused(2000 + minPauseMs)).toBe(false);
  });
});
