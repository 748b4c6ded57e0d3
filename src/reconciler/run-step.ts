/**
 * Every step of a pass runs through `runStep`: it says the step is under way (the Reconciling
 * condition, and the status file for steps people wait on), times it for the pass summary, and
 * turns a failure into that step's outcome: a ShardctlError keeps its reason and terminality, any
 * other failure becomes the step's own reason (transient), and the pass history records the action
 * of the step that failed (steps that only read or decide record "none").
 */
import { isShardctlError, messageOf, ShardctlError, type Reason } from "../errors/index.js";
import { revisionOf, type Pass } from "./pass.js";
import { setConditions, type Verdict } from "./verdicts.js";
import type { ProgressReason } from "./status/index.js";

/** A step of the pass story: a function of the pass that hands over to the next step or ends the pass. */
export interface Step {
  name: string;
  /** The action the pass history records when this step ends the pass or fails. */
  action: string;
  /** The reason of a failure that is not a ShardctlError (transient: retried with back-off). */
  failure: Reason;
  /** Said while the step runs: Reconciling=True with this reason and message; `announce` also writes the status file. Nothing when undefined (a step with nothing to do in this pass). */
  progress?: (pass: Pass) => { reason: ProgressReason; message: string; announce?: boolean } | undefined;
  /**
   * The pass does not start this step once its launch is called off (the definition asks for
   * another revision, or the daemon stops): replacing what runs, staging, launching.
   */
  yieldsToCallOff?: boolean;
  /** Ends the pass with a verdict, or returns nothing to hand over to the next step. */
  run(pass: Pass): Promise<Verdict | void>;
}

/** A failure of one step: the cause's reason and terminality, and the step's action. */
export class StepFailure extends ShardctlError {
  constructor(
    readonly step: Step,
    cause: unknown,
  ) {
    super(isShardctlError(cause) ? cause.reason : step.failure, messageOf(cause), { terminal: isShardctlError(cause) && cause.terminal, cause });
    this.name = "StepFailure";
  }
}

export async function runStep(pass: Pass, step: Step): Promise<Verdict | void> {
  const started = performance.now();
  const progress = step.progress?.(pass);
  if (progress !== undefined) {
    setConditions(pass.memory, revisionOf(pass), { Reconciling: { status: "True", reason: progress.reason, message: progress.message } });
    if (progress.announce === true)
      await pass.world.writeStatus(pass.name, pass.memory, { action: step.action, result: "waiting", health: "Progressing" }, pass.settings);
  }
  try {
    const verdict = await step.run(pass);
    pass.steps.push({ name: step.name, ms: Math.round(performance.now() - started) });
    return verdict;
  } catch (error) {
    pass.steps.push({ name: step.name, ms: Math.round(performance.now() - started), failed: true });
    throw error instanceof StepFailure ? error : new StepFailure(step, error);
  }
}
