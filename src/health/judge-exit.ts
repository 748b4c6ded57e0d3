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

/**
 * Each question of a judgement (a log read, a liveness probe of the peer) may take at least this
 * long to be answered, even past the window, ms: on a busy machine one question over SSH can take
 * longer than the whole window, and a judgement that asked nothing in time would blame the exit seen
 * first without having looked. The window bounds how long the peer is looked for, not one answer.
 * 2 s, as every other read of a death's evidence: at 1 s a log read on a machine running three test
 * files at once (load 7) went unanswered, and a stage that exited because its upstream was killed
 * was blamed for the death.
 */
const oneAnswerMs = 2_000;

/** Pause between two liveness probes of the peer a lost link names, ms. */
const peerProbePauseMs = 20;

/** The last lines of a log the engine's words are read from. */
const tailLines = 20;

export interface JudgeExitOptions {
  cluster: WatchedCluster;
  nodeFor: (name: string) => NodeAccess;
  /** How long the peer a lost link names is looked for, ms (each question still gets one answer: see oneAnswerMs). Default `defaultLostPeerWindowMs` (500). */
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
  /** The peer the blamed member says it lost, when that peer was not seen gone, and what was seen of it. */
  lostUnseen?: { report: LostPeerReport; peer: "alive" | "unknown" };
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
    const logMs = Math.max(oneAnswerMs, deadline - performance.now());
    const report = lostPeerIn(blamed.logFile === undefined ? [] : await readTail(options.nodeFor(blamed.node), blamed.logFile, tailLines, logMs));
    const peer = report === undefined ? undefined : cluster.processes.find((p) => labelOf(p) === report.peer);
    if (report === undefined || peer === undefined || peer === blamed) break;
    // Two members that name each other: a link between two live members ended, not a death.
    if (peer === first || consequences.some((c) => c.process === peer)) return stays;
    const seen = await waitUntilGone(peer, deadline, options);
    if (seen !== "gone") return { blamed, consequences, lostUnseen: { report, peer: seen } };
    consequences.push({ process: blamed, report });
    blamed = peer;
  }
  return { blamed, consequences };
}

/**
 * Whether `process` is seen gone (by the monitor or a probe of its own) before `deadline` — it is
 * asked at least once — else what its last probe found: `alive`, or `unknown` (no answer).
 */
async function waitUntilGone(process: WatchedProcess, deadline: number, options: JudgeExitOptions): Promise<"gone" | "alive" | "unknown"> {
  const node = options.nodeFor(process.node);
  let last: "alive" | "unknown" | undefined;
  while (!options.signal.aborted) {
    if (options.seenGone(process)) return "gone";
    const left = Math.round(deadline - performance.now());
    if (left <= 0 && last !== undefined) return last;
    const { state } = await probeLiveness(node, process, { deadlineMs: Math.max(oneAnswerMs, left) });
    if (state === "gone") return "gone";
    last = state === "alive" ? "alive" : "unknown";
    await new Promise((resolve) => setTimeout(resolve, Math.min(peerProbePauseMs, Math.max(0, deadline - performance.now()))));
  }
  return last ?? "unknown";
}
