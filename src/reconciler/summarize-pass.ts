/**
 * One line at the end of every pass, as Flux writes after each reconciliation: the cluster, what
 * the pass did and how it ended, how long it took and where the time went. A pass that repeats the
 * last one (an idle resync) is logged at debug level so an idle daemon's log stays quiet.
 */
import type { Logger } from "pino";
import { clipMessage } from "../errors/index.js";
import type { ClusterMemory } from "./cluster-memory.js";
import type { Pass } from "./pass.js";
import type { Verdict } from "./verdicts.js";

export function summarizePass(log: Logger, name: string, memory: ClusterMemory, verdict: Verdict, durationMs: number, steps: Pass["steps"], repeated: boolean): void {
  const fields = {
    cluster: name,
    revision: memory.lastGood?.revision.slice(0, 12),
    action: verdict.action,
    result: verdict.result,
    ...(verdict.reason === undefined ? {} : { reason: verdict.reason }),
    // A pass that failed or stalled says why in its own line (an invalid definition: its file:line:col),
    // not only in the status file: the log is where a person at the terminal looks first.
    ...((verdict.result === "failed" || verdict.result === "stalled") && memory.lastError !== undefined ? { error: clipMessage(memory.lastError.message) } : {}),
    health: verdict.health,
    durationMs,
    steps: steps.map((s) => `${s.name} ${s.ms}ms${s.failed === true ? " (failed)" : ""}`).join(", "),
  };
  const line = `${verdict.action} ${verdict.result}${verdict.reason === undefined ? "" : ` (${verdict.reason})`} in ${durationMs} ms`;
  if (repeated) log.debug(fields, line);
  else if (verdict.result === "failed" || verdict.result === "stalled") log.warn(fields, line);
  else log.info(fields, line);
}
