/**
 * Whom a process's exit is blamed on. A pipeline member exits when a peer's link closes (a pipeline
 * cannot survive the loss of one), milliseconds after that peer died, and each member's exit is
 * watched on its own (a poll every 100 ms on its node): the exit seen first is as often such a
 * consequence as the death that caused it. An engine that says why it exited (its log names the
 * peer whose link closed, as shard-engine's "peer lost" line does) has that peer looked at for a
 * short while: seen gone too, the peer is blamed and the first exit kept as its consequence —
 * followed the same way when the peer's own log names a lost link (a break travelling down a
 * longer pipeline). The blame stays with the exit seen first when the engine says nothing (mlx-lm,
 * mlxcel), when the peer it names still runs at the end of the window, or when two members name
 * each other (a link reset between two live members: neither explains the other's exit).
 */
import { defaultEngineKind, engineOf, type LostPeerReport } from "../engines/index.js";
import { readTail, type NodeAccess } from "../nodes/index.js";
import { labelOf } from "./labels.js";
import { probeLiveness } from "./probes.js";
import type { WatchedCluster, WatchedProcess } from "./types.js";

/**
 * How long in all an exit caused by a lost link waits for the peer it names to be seen gone, ms.
 * Default 500: the peer's end of the link closed as it died, so its exit (its wrapper recording the
 * status) follows within milliseconds; the rest is the log read and the liveness probes over SSH on
 * a busy machine. A peer still running after that closed the link for some other reason.
 */
export const defaultLostPeerWindowMs = 500;

/** Pause between two liveness probes of the peer a lost link names, ms. */
const peerProbePauseMs = 20;

/** The last lines of a log the engine's words are read from. */
const tailLines = 20;

export interface JudgeExitOptions {
  cluster: WatchedCluster;
  nodeFor: (name: string) => NodeAccess;
  /** How long the judgement may take in all, ms. Default `defaultLostPeerWindowMs` (500). */
  windowMs?: number;
  /** Whether the monitor saw `process` gone already (its exit watch or a liveness probe). */
  seenGone: (process: WatchedProcess) => boolean;
  signal: AbortSignal;
}

/** A member that exited because it lost its link to the next one judged (or to the blamed one). */
export interface LostLinkExit {
  process: WatchedProcess;
  report: LostPeerReport;
}

export interface ExitJudgement {
  /** The member the death is blamed on. */
  blamed: WatchedProcess;
  /** The members seen gone because of it, the first seen first; empty when the blame stayed. */
  consequences: LostLinkExit[];
}

/** Judge the exit of `first`, seen gone: blame it, or the member whose lost link it exited because of. */
export async function judgeExit(first: WatchedProcess, options: JudgeExitOptions): Promise<ExitJudgement> {
  const { cluster } = options;
  const lostPeerIn = engineOf(cluster.engine ?? defaultEngineKind).lostPeerIn;
  const stays: ExitJudgement = { blamed: first, consequences: [] };
  if (lostPeerIn === undefined) return stays;
  const deadline = performance.now() + (options.windowMs ?? defaultLostPeerWindowMs);
  const consequences: LostLinkExit[] = [];
  let blamed = first;
  for (;;) {
    const report = lostPeerIn(blamed.logFile === undefined ? [] : await readTail(options.nodeFor(blamed.node), blamed.logFile, tailLines, deadline - performance.now()));
    const peer = report === undefined ? undefined : cluster.processes.find((p) => labelOf(p) === report.peer);
    if (report === undefined || peer === undefined || peer === blamed) break;
    // Two members that name each other: a link between two live members ended, not a death.
    if (peer === first || consequences.some((c) => c.process === peer)) return stays;
    if (!(await waitUntilGone(peer, deadline, options))) break;
    consequences.push({ process: blamed, report });
    blamed = peer;
  }
  return { blamed, consequences };
}

/** Whether `process` is seen gone (by the monitor or a probe of its own) before `deadline`. */
async function waitUntilGone(process: WatchedProcess, deadline: number, options: JudgeExitOptions): Promise<boolean> {
  const node = options.nodeFor(process.node);
  while (!options.signal.aborted) {
    if (options.seenGone(process)) return true;
    const left = Math.round(deadline - performance.now());
    if (left <= 0) return false;
    const { state } = await probeLiveness(node, process, { deadlineMs: left });
    if (state === "gone") return true;
    await new Promise((resolve) => setTimeout(resolve, Math.min(peerProbePauseMs, Math.max(0, deadline - performance.now()))));
  }
  return false;
}
