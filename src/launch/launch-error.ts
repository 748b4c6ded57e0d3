import { ShardctlError } from "../errors/index.js";

/** Reasons a launch fails, one per step (issue 5). */
export type LaunchFailure =
  | "StageExited"
  | "StageListenTimeout"
  | "PortInUse"
  | "PortRangeExhausted"
  | "CoordinatorExited"
  | "CoordinatorHealthTimeout"
  | "ReadinessProbeFailed"
  | "RouterRegistrationFailed"
  | "LaunchFilesFailed";

/**
 * A failed launch step. `logTail` holds the last log lines of the process that failed, the
 * evidence kept in the status file; everything already started has been torn down when it is thrown.
 */
export class LaunchError extends ShardctlError {
  readonly step: string;
  readonly logTail: string[];

  constructor(reason: LaunchFailure, step: string, message: string, options: { logTail?: string[]; cause?: unknown } = {}) {
    super(reason, message, { cause: options.cause });
    this.name = "LaunchError";
    this.step = step;
    this.logTail = options.logTail ?? [];
  }
}

