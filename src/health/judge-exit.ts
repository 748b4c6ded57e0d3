/**
 * Whom a process's exit is blamed on. A pipeline member exits when a peer's link closes (a pipeline
 * cannot survive the loss of one), milliseconds after that peer died, and each member's exit is
 * watched on its own (a poll every 100 ms on its node): the exit seen first is as often such a
 * consequence as the death that caused it. An engine that says why it exited (its log names the
 * peer whose link closed, as shard-engine's "peer lost" line does) has that peer looked at for a
 * short while: seen gone too, the peer is blamed and the first exit kept as its consequence —
 * followed the same way when the peer's own log names a lost link (a break travelling down a
 * longer pipeline). When the engine says nothing (mlx-lm, mlxcel, an engine of another's making),
 * the exits themselves tell the order: a member gone by then whose exit came first is blamed, by
 * the wrappers' exit-status files (their times, on the same node; across nodes, whose clocks differ,
 * a kill from outside before an exit of the process's own making), since a stage killed by the OOM killer must
 * not be reported as the coordinator that exited because its link closed. The blame stays with the
 * exit seen first when nothing says otherwise, when the peer a log names still runs at the end of
 * the window, or when two members name each other (a link reset between two live members: neither
 * explains the other's exit).
 */
import { defaultEngineKind, engineOf, type LostPeerReport } from "../engines/index.js";
import { readTail, within, type NodeAccess } from "../nodes/index.js";
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

/**
 * A member that exited because of the blamed one: it lost its link to the next one judged (or to
 * the blamed one), as its log says, or (`after`) its exit came after the blamed one's.
 */
export interface LostLinkExit {
  process: WatchedProcess;
  report?: LostPeerReport;
  /** Said after how it was seen gone: `after stage-1 went first, which was killed by SIGKILL`. */
  after?: string;
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
  if (lostPeerIn === undefined) return (await judgeByExitOrder(first, options)) ?? stays;
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

/** A process's exit as its wrapper recorded it: the status, and when (the file's time, seconds). */
interface RecordedExit {
  process: WatchedProcess;
  status: number;
  atSec: number;
}

/**
 * Killed from outside: SIGKILL (the OOM killer, `kill -9`), SIGTERM, SIGINT or SIGHUP (the wrapper's
 * shell reports 128 + the number; these four are numbered alike on Linux and macOS). Not the
 * signals a process brings on itself, as one that lost its link may: SIGPIPE writing to the closed
 * socket, SIGABRT or SIGSEGV from a failed assertion.
 */
function killedFromOutside(status: number): boolean {
  return [128 + 9, 128 + 15, 128 + 2, 128 + 1].includes(status);
}

const outsideSignals: Record<number, string> = { [128 + 9]: "SIGKILL", [128 + 15]: "SIGTERM", [128 + 2]: "SIGINT", [128 + 1]: "SIGHUP" };

/** The exit `process`'s wrapper recorded, or undefined when none is there (yet) or the node does not say. */
async function recordedExit(process: WatchedProcess, options: JudgeExitOptions): Promise<RecordedExit | undefined> {
  if (process.exitFile === undefined) return undefined;
  const node = options.nodeFor(process.node);
  const ask = async (): Promise<RecordedExit | undefined> => {
    const [stat, text] = await Promise.all([node.stat(process.exitFile!), node.readFile(process.exitFile!).then((b) => b.toString("utf8").trim())]);
    return stat !== undefined && /^\d+$/.test(text) ? { process, status: Number(text), atSec: stat.mtimeSec } : undefined;
  };
  return within(oneAnswerMs, ask(), undefined);
}

/**
 * For engines that do not say why they exited: the member whose exit came before `first`'s, among
 * those gone by now, or undefined when none is known to have. On `first`'s node the
 * exit-status files' times order them; across nodes (clocks differ), or within one clock tick, a kill from outside
 * (SIGKILL, SIGTERM, SIGINT, SIGHUP) comes before an exit of the process's own making, as a stage
 * killed by the OOM killer comes before the peers that lost their link to it.
 */
async function judgeByExitOrder(first: WatchedProcess, options: JudgeExitOptions): Promise<ExitJudgement | undefined> {
  const own = await recordedExit(first, options);
  if (own === undefined) return undefined;
  // Each other member is asked once, now, not waited for: an engine that says nothing gets no
  // window (its ranks may outlive the death, as mlx-lm's rank 0 does), and the member that went
  // first is gone by now.
  const now = performance.now();
  const others = options.cluster.processes.filter((p) => p !== first && (p.pid !== first.pid || p.node !== first.node));
  const exits = await Promise.all(others.map(async (p) => ((await waitUntilGone(p, now, options)) === "gone" ? await recordedExitSoon(p, options) : undefined)));
  // A file's time is the kernel's clock tick (1–4 ms on Linux): two exits within one tick tie, and
  // then, as across nodes, a kill from outside comes before an exit of the process's own making.
  // Between two exits of their own making, a stage's comes before the coordinator's when the
  // coordinator's last log lines name that stage (it exited because it lost it: "link to stage-1
  // closed"); without a word from it, whichever exit the watch saw first keeps the blame.
  const said = first.role === "coordinator" && first.logFile !== undefined ? await readTail(options.nodeFor(first.node), first.logFile, namingLines, oneAnswerMs) : [];
  const killedBefore = (e: RecordedExit): boolean => killedFromOutside(e.status) && !killedFromOutside(own.status);
  const namedBefore = (e: RecordedExit): boolean =>
    e.process.role === "stage" && !killedFromOutside(e.status) && !killedFromOutside(own.status) && namesMember(said, labelOf(e.process));
  const before = (e: RecordedExit): boolean => (e.process.node === first.node && e.atSec !== own.atSec ? e.atSec < own.atSec : killedBefore(e) || namedBefore(e));
  const earlier = exits
    .filter((e): e is RecordedExit => e !== undefined)
    .filter(before)
    .sort((a, b) =>
      a.process.node === b.process.node && a.atSec !== b.atSec ? a.atSec - b.atSec : Number(killedFromOutside(b.status)) - Number(killedFromOutside(a.status)),
    );
  const blamed = earlier[0];
  if (blamed === undefined) return undefined;
  const how = killedFromOutside(blamed.status) ? `, which was killed by ${outsideSignals[blamed.status]}` : "";
  return { blamed: blamed.process, consequences: [{ process: first, after: `after ${labelOf(blamed.process)} went first${how}` }] };
}

/** A member just seen gone: its wrapper writes the exit status a moment after (up to 200 ms asked). */
async function recordedExitSoon(process: WatchedProcess, options: JudgeExitOptions): Promise<RecordedExit | undefined> {
  for (let i = 0; i < 5 && !options.signal.aborted; i++) {
    const exit = await recordedExit(process, options);
    if (exit !== undefined) return exit;
    await new Promise((resolve) => setTimeout(resolve, 40));
  }
  return undefined;
}

/** The coordinator's last log lines read for a stage it names as it exits. */
const namingLines = 5;

/** Whether `lines` name `label` ("stage-1") as a word of its own: not "stage-10". */
function namesMember(lines: readonly string[], label: string): boolean {
  const word = new RegExp(`(^|[^\\w-])${label}(?![\\w-])`);
  return lines.some((line) => word.test(line));
}
