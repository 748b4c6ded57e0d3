/**
 * Whether a pipeline whose one-token probe timed out was busy with a long prompt rather than hung,
 * from the steps of it the engine logs (EngineReadiness.promptStepIn). An engine such as mlx-lm
 * takes no new request in while it processes a prompt, and each step of a long one takes longer
 * than the last (seconds at first, a minute deep into a long context), so one step may outlast the
 * probe's deadline. The pipeline moves when a step was logged since the probe began, or while a
 * prompt not yet processed whole has its last step younger than twice the longest it took so far
 * (twice the deadline before its second step). A hang in the middle of a prompt is so found
 * within about twice its slowest step.
 */
import type { PromptStep } from "../engines/index.js";

interface LoggedStep {
  line: string;
  step: PromptStep;
}

export class PromptProgress {
  /** The last step seen, and when it was first seen (performance.now(), ms). */
  private last: { line: string; seenAt: number } | undefined;

  constructor(
    /** The end of the server's log, as lines (none when its node did not answer). */
    private readonly readLog: () => Promise<readonly string[]>,
    private readonly stepIn: (line: string) => PromptStep | undefined,
    /** The probe's deadline, ms. */
    private readonly timeoutMs: number,
  ) {}

  /** Note the last step logged, as a probe begins. */
  async mark(now = performance.now()): Promise<void> {
    const latest = (await this.steps()).at(-1);
    if (latest !== undefined && latest.line !== this.last?.line) this.last = { line: latest.line, seenAt: now };
  }

  /** After a probe timed out: whether the log shows a prompt moving. */
  async moving(now = performance.now()): Promise<boolean> {
    const steps = await this.steps();
    const latest = steps.at(-1);
    if (latest === undefined) return false;
    if (latest.line !== this.last?.line) {
      this.last = { line: latest.line, seenAt: now };
      return true;
    }
    if (latest.step.done >= latest.step.total) return false;
    return now - this.last.seenAt <= Math.max(2 * this.timeoutMs, 2 * longestStepMs(steps));
  }

  private async steps(): Promise<LoggedStep[]> {
    const steps: LoggedStep[] = [];
    for (const line of await this.readLog()) {
      const step = this.stepIn(line);
      if (step !== undefined) steps.push({ line, step });
    }
    return steps;
  }
}

/** The longest time between two steps of the last prompt (steps of one total, each further than the one before), ms. */
function longestStepMs(steps: readonly LoggedStep[]): number {
  let longest = 0;
  for (let i = steps.length - 1; i > 0; i--) {
    const { step } = steps[i]!;
    const before = steps[i - 1]!.step;
    if (before.total !== step.total || before.done >= step.done) break;
    longest = Math.max(longest, step.atMs - before.atMs);
  }
  return longest;
}
