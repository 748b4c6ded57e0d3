import type { Reason } from "./reasons/index.js";

/**
 * The one error shape of the control plane. `reason` is a stable CamelCase word that status
 * conditions and tests match on; `message` is for people. `terminal` errors (an invalid
 * definition, an infeasible plan) stall until the input changes; the others are transient and
 * are retried with back-off.
 */
export class ShardctlError extends Error {
  readonly reason: Reason;
  readonly terminal: boolean;

  constructor(reason: Reason, message: string, options: { terminal?: boolean; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = "ShardctlError";
    this.reason = reason;
    this.terminal = options.terminal ?? false;
  }
}

/** True when `error` is a ShardctlError with the given reason (or any reason when omitted). */
export function isShardctlError(error: unknown, reason?: Reason): error is ShardctlError {
  return error instanceof ShardctlError && (reason === undefined || error.reason === reason);
}
