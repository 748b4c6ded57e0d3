import { ShardctlError, type LaunchStepReason } from "../errors/index.js";

/**
 * A failed launch step. `logTail` holds the last log lines of the process that failed, the
 * evidence kept in the status file; everything already started has been torn down when it is thrown.
 */
export class LaunchError extends ShardctlError {
  readonly step: string;
  readonly logTail: string[];

  constructor(reason: LaunchStepReason, step: string, message: string, options: { logTail?: string[]; cause?: unknown } = {}) {
    super(reason, message, { cause: options.cause });
    this.name = "LaunchError";
    this.step = step;
    this.logTail = options.logTail ?? [];
  }
}
