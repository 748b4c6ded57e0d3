/**
 * The death a pass found before the health monitor did (the two race when a pass is under way at
 * the kill), judged as the monitor judges an exit: of the processes the pass saw gone, one whose
 * engine says it exited because its link to another of them closed (shard-engine's "peer lost"
 * line) is that one's consequence, named after it; of the rest, the one that ended by a signal is
 * blamed first (its peers exit with a status when their pipeline breaks), else the first gone. An
 * engine that says nothing of why it exited (mlx-lm, mlxcel) leaves every process gone a candidate,
 * and so do members that name each other (a link between two live members ended).
 */
import { defaultEngineKind, engineOf, type LostPeerReport } from "../engines/index.js";
import { consequenceOf, type DeathConsequence, type DeathEvent } from "../health/index.js";
import { describeExit, processLabel, readLogTail, type LedgerEntry, type LedgerProcess } from "../launch/index.js";
import { within } from "../nodes/index.js";
import type { Pass } from "./pass.js";
import { evidenceDeadlineMs } from "./record-death.js";

/** What a pass learnt of a process it saw gone: how it ended, and the peer it says it lost. */
interface GoneProcess {
  process: LedgerProcess;
  label: string;
  /** `killed by SIGKILL (status 137)`, `exited with status 1`, or "" when not known in time. */
  exit: string;
  lost: LostPeerReport | undefined;
}

export async function deathFoundByPass(pass: Pass, entry: LedgerEntry, gone: readonly string[]): Promise<DeathEvent | undefined> {
  const found = await Promise.all(entry.processes.filter((p) => gone.includes(processLabel(p.role, p.index))).map((p) => askAbout(pass, entry, p)));
  if (found.length === 0) return undefined;
  const labels = found.map((f) => f.label);
  const isConsequence = (f: GoneProcess): boolean => f.lost !== undefined && f.lost.peer !== f.label && labels.includes(f.lost.peer);
  const causes = found.filter((f) => !isConsequence(f));
  const candidates = causes.length > 0 ? causes : found;
  const blamed = candidates.find((f) => f.exit.startsWith("killed by")) ?? candidates[0]!;
  const consequences: DeathConsequence[] =
    causes.length > 0 ? found.filter(isConsequence).map((f) => consequenceOf(f.label, f.process.node, seenGone(f.process), f.lost!)) : [];
  return {
    cluster: entry.cluster,
    label: blamed.label,
    node: blamed.process.node,
    reason: blamed.process.role === "stage" ? "StageDied" : "CoordinatorDied",
    detail: seenGone(blamed.process),
    at: new Date().toISOString(),
    ...(consequences.length > 0 ? { consequences } : {}),
  };
}

/** How the process ended and what its log says it lost, each bounded at 2 s (readLogTail bounds its own read). */
async function askAbout(pass: Pass, entry: LedgerEntry, process: LedgerProcess): Promise<GoneProcess> {
  const { lostPeerIn } = engineOf(entry.engine ?? defaultEngineKind);
  const node = pass.world.nodeFor(process.node, pass.settings);
  const [exit, tail] = await Promise.all([
    within(evidenceDeadlineMs, describeExit(node, process), ""),
    lostPeerIn === undefined ? Promise.resolve([]) : readLogTail(node, process),
  ]);
  return { process, label: processLabel(process.role, process.index), exit, lost: lostPeerIn?.(tail) };
}

function seenGone(process: LedgerProcess): string {
  return `pid ${process.pid} is no longer running`;
}
