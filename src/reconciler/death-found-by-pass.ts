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
import { blamedForLostLink, consequenceOf, probeLiveness, type DeathConsequence, type DeathEvent } from "../health/index.js";
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
  const named = await askNamedPeers(pass, entry, found);
  found.push(...named.gone);
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
    detail:
      blamed.lost !== undefined && named.seen.has(blamed.lost.peer)
        ? blamedForLostLink(seenGone(blamed.process), blamed.lost, named.seen.get(blamed.lost.peer)!)
        : seenGone(blamed.process),
    at: new Date().toISOString(),
    ...(consequences.length > 0 ? { consequences } : {}),
  };
}

/**
 * The peers that members seen gone say they lost, which the pass's probes did not see gone: each is
 * asked once more now (bounded at 2 s). A peer that died first may have been probed a moment before
 * its death, or its probe may have gone unanswered on a busy node; found gone now, it is judged with
 * the rest rather than its neighbour blamed for exiting because of it. Those not gone are returned
 * with what their probe found (`alive`, or `unknown` without an answer).
 */
async function askNamedPeers(pass: Pass, entry: LedgerEntry, found: readonly GoneProcess[]): Promise<{ gone: GoneProcess[]; seen: Map<string, "alive" | "unknown"> }> {
  const known = new Set(found.map((f) => f.label));
  const named = entry.processes.filter((p) => {
    const label = processLabel(p.role, p.index);
    return !known.has(label) && found.some((f) => f.lost?.peer === label);
  });
  const asked = await Promise.all(
    named.map(async (p) => ({ p, probe: await probeLiveness(pass.world.nodeFor(p.node, pass.settings), p, { deadlineMs: evidenceDeadlineMs }) })),
  );
  const seen = new Map<string, "alive" | "unknown">();
  for (const a of asked) if (a.probe.state !== "gone") seen.set(processLabel(a.p.role, a.p.index), a.probe.state);
  return { gone: await Promise.all(asked.filter((a) => a.probe.state === "gone").map((a) => askAbout(pass, entry, a.p))), seen };
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
