/**
 * A long prompt against a hang, from the steps mlx-lm's server logs (its own line format, with the
 * access lines of /health between them): a step logged since the probe began is progress; a prompt
 * not yet processed whole may take up to twice its slowest step (twice the deadline before its
 * second step) for the next; a finished prompt, or no step, is no progress.
 */
import { describe, expect, it } from "vitest";
import { promptStepIn } from "../../src/engines/mlx-lm/prompt-step.js";
import { PromptProgress } from "../../src/health/prompt-progress.js";

const step = (time: string, done: number, total: number): string => `2026-12-05 18:01:${time} - INFO - Prompt processing progress: ${done}/${total}`;
const access = '127.0.0.1 - - [05/Dec/2026 18:01:09] "GET /health HTTP/1.1" 200 -';

describe("mlx-lm's prompt steps", () => {
  it("reads the time and the counts of its line, and nothing else", () => {
    expect(promptStepIn(step("08,123", 4096, 90000))).toEqual({ atMs: Date.UTC(2026, 11, 5, 18, 1, 8, 123), done: 4096, total: 90000 });
    expect(promptStepIn(access)).toBeUndefined();
    expect(promptStepIn("2026-12-05 18:01:08,123 - WARNING - Prompt processing progress: 1/2")).toBeUndefined();
  });
});

describe("PromptProgress", () => {
  const timeoutMs = 5_000;
  const watch = (log: string[]) => new PromptProgress(async () => log, promptStepIn, timeoutMs);

  it("a step logged while the probe waited: moving", async () => {
    const log = [step("00,000", 2048, 90000), access];
    const progress = watch(log);
    await progress.mark(0);
    log.push(step("06,000", 4096, 90000), access);
    expect(await progress.moving(5_000)).toBe(true);
  });

  it("no step since the probe began, the prompt unfinished: moving for up to twice its slowest step, then not", async () => {
    const log = [step("00,000", 2048, 90000), step("09,000", 4096, 90000), step("21,000", 6144, 90000), access];
    const progress = watch(log);
    await progress.mark(0);
    // Slowest step: 12 s; twice that: 24 s from when the last step was first seen.
    expect(await progress.moving(5_000)).toBe(true);
    expect(await progress.moving(24_000)).toBe(true);
    expect(await progress.moving(24_001)).toBe(false);
  });

  it("one step of the prompt so far: twice the deadline", async () => {
    const log = [step("00,000", 2048, 90000)];
    const progress = watch(log);
    await progress.mark(0);
    expect(await progress.moving(10_000)).toBe(true);
    expect(await progress.moving(10_001)).toBe(false);
  });

  it("the last prompt processed whole, or no step at all: not moving", async () => {
    const finished = watch([step("00,000", 2048, 4000), step("02,000", 4000, 4000), access]);
    await finished.mark(0);
    expect(await finished.moving(5_000)).toBe(false);
    const none = watch([access]);
    await none.mark(0);
    expect(await none.moving(5_000)).toBe(false);
  });

  it("steps of an earlier prompt do not count towards the slowest step of this one", async () => {
    const log = [step("00,000", 2048, 9000), step("50,000", 4096, 9000), step("51,000", 2048, 90000), step("52,000", 4096, 90000)];
    const progress = watch(log);
    await progress.mark(0);
    // This prompt's slowest step is 1 s: twice the deadline (10 s) applies, not twice 50 s.
    expect(await progress.moving(10_000)).toBe(true);
    expect(await progress.moving(10_001)).toBe(false);
  });
});
