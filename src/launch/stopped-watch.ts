/**
 * A launch's processes may be stopped while the launch waits on them (SIGSTOP right after spawn, a
 * job-control stop, a debugger attached): a stopped stage never listens, a stopped ring rank holds
 * every other rank, a stopped coordinator never answers /health. Only the phase's deadline ends
 * such a wait (60 s for the stages, 120 s for /health by default), and meanwhile the status said
 * nothing but "its processes are starting". So while a launch waits, the processes it has started
 * are looked at (one `ps` per node, each bounded as every question of a wait) at most once per
 * `intervalMs`, beside the wait (a look at a silent node never holds it past its deadline); a
 * process seen stopped on `sightings` looks in a row is said at once, as a timeline
 * event the status file shows while the wait goes on (`stage-N-paused`, `coordinator-paused`; and
 * `…-resumed` when it runs again), and the phase's timeout names it. The wait itself keeps its
 * deadline: a process may be continued, and the launch then goes on.
 *
 * The same looks count a process waiting on I/O ("D", most often its disk): a load reads its
 * weights, so one such look says nothing, but three in a row are said (`stage-N-disk-wait`), and a
 * timeout says in how many of its looks the process was found so: a model read from a slow or hung
 * file system (a slow disk needs a longer load timeout; a hung one, the disk or mount seen to).
 */
import { describeStopped, lookForStoppedMembers, type StoppedMember } from "../health/index.js";
import type { NodeAccess } from "../nodes/index.js";
import type { LedgerEntry, LedgerProcess } from "./ledger.js";
import { defaultReachMs, processLabel } from "./processes.js";

export interface StoppedWatchOptions {
  /** Least time between two looks, ms. Default 1000. */
  intervalMs?: number;
  /** Looks in a row that must see a process stopped before it is said. Default 2 (as health's strikes). */
  sightings?: number;
}

/** What the launch waits for when it looks: said in the event, so a reader knows what is held up and until when. */
export interface AwaitedPhase {
  /** "stage-0 to listen on 10.0.0.2:39600", "http://…/health to answer 200". */
  what: string;
  /** When the phase's deadline ends the wait (and the launch fails, tearing everything down). */
  until: Date;
}

export interface StoppedWatch {
  /** Start a look, unless one is under way or the last began less than `intervalMs` ago; returns at once. */
  look(phase: AwaitedPhase): void;
  /** What a timeout's message adds: "; stage-0 on n1 is stopped (…) since …", or "" when none is. */
  words(): string;
  /** What a timeout's message adds of `process`'s waits on I/O: "; it was waiting on I/O … in 7 of the 9 looks …", or "". */
  diskWords(process: LedgerProcess): string;
  /**
   * `process` did what the launch waited for (it listens, it answers): if it was said paused, it runs
   * again, and `…-resumed` is said now — it may answer before the next look would have seen it.
   */
  answered(process: LedgerProcess): void;
  /** The launch stopped waiting: a look still under way says nothing more. */
  close(): void;
}

interface Sighting {
  member: StoppedMember;
  count: number;
  since: string;
  said: boolean;
}

export function watchStopped(
  entry: LedgerEntry,
  nodeFor: (name: string) => NodeAccess,
  event: (step: string, detail?: string) => void,
  options: StoppedWatchOptions = {},
): StoppedWatch {
  const { intervalMs = 1_000, sightings = 2 } = options;
  const seen = new Map<string, Sighting>();
  /** Per process label: looks that found it waiting on I/O, of those its node answered, and the run of them in a row. */
  const diskWaits = new Map<string, { waiting: number; looks: number; inRow: number; said: boolean }>();
  /** Looks in a row that must find a process waiting on I/O before it is said. */
  const diskSightings = 3;
  let lastLook = Number.NEGATIVE_INFINITY;
  let looking = false;
  let closed = false;
  const lookOnce = async (phase: AwaitedPhase): Promise<void> => {
    const started = { cluster: entry.cluster, processes: entry.processes.filter((p) => p.pid > 0), ports: [] };
    if (started.processes.length === 0) return;
    const { stopped, diskWaiting, answered } = await lookForStoppedMembers(started, nodeFor, defaultReachMs);
    if (closed) return;
    const now = new Date().toISOString();
    for (const process of started.processes) {
      if (!answered.has(process.node)) continue;
      const label = processLabel(process.role, process.index);
      const waits = diskWaits.get(label) ?? { waiting: 0, looks: 0, inRow: 0, said: false };
      const found = diskWaiting.find((m) => m.process === process);
      waits.looks += 1;
      waits.waiting += found === undefined ? 0 : 1;
      waits.inRow = found === undefined ? 0 : waits.inRow + 1;
      diskWaits.set(label, waits);
      if (found === undefined || waits.said || waits.inRow < diskSightings) continue;
      waits.said = true;
      event(
        `${label}-disk-wait`,
        `waiting on I/O (pid ${found.pid} in state D) on ${process.node}, ${waits.inRow} looks in a row: most often its disk; a slow or hung file system under its model_dir holds it up while the launch waits for ${phase.what} until ${phase.until.toISOString()}`,
      );
    }
    for (const member of stopped) {
      const label = processLabel(member.process.role, member.process.index);
      const sighting = seen.get(label) ?? { member, count: 0, since: now, said: false };
      sighting.member = member;
      sighting.count += 1;
      seen.set(label, sighting);
      if (sighting.said || sighting.count < sightings) continue;
      sighting.said = true;
      event(
        `${label}-paused`,
        `stopped (${describeStopped(member)}) on ${member.process.node}, ${sighting.count} looks in a row since ${sighting.since}: ` +
          `the launch waits for ${phase.what} until ${phase.until.toISOString()}, which cannot happen while it is stopped (kill -CONT ${member.pid} continues it); then everything started is torn down`,
      );
    }
    // A process its node says is no longer stopped runs again (or is gone, which the wait itself
    // finds); one whose node did not answer this look is neither.
    for (const [label, sighting] of seen) {
      if (!answered.has(sighting.member.process.node) || stopped.some((m) => m.process === sighting.member.process)) continue;
      resume(label, sighting, "is no longer stopped");
    }
  };
  const resume = (label: string, sighting: Sighting, how: string): void => {
    seen.delete(label);
    if (sighting.said) event(`${label}-resumed`, `pid ${sighting.member.pid} on ${sighting.member.process.node} ${how}`);
  };
  return {
    look(phase) {
      if (closed || looking || performance.now() - lastLook < intervalMs) return;
      lastLook = performance.now();
      looking = true;
      // A look is advice beside the wait: one that fails (a node that cannot be asked) says nothing.
      void lookOnce(phase)
        .catch(() => undefined)
        .finally(() => (looking = false));
    },
    close() {
      closed = true;
    },
    answered(process) {
      const label = processLabel(process.role, process.index);
      const sighting = seen.get(label);
      if (sighting !== undefined && !closed) resume(label, sighting, "is no longer stopped: it did what the launch waited for");
    },
    diskWords(process) {
      const waits = diskWaits.get(processLabel(process.role, process.index));
      if (waits === undefined || waits.waiting < diskSightings) return "";
      return `; it was waiting on I/O (state D, most often its disk) in ${waits.waiting} of the ${waits.looks} looks at it: it reads from a slow or hung file system under its model_dir`;
    },
    words() {
      const said = [...seen.entries()].filter(([, s]) => s.said);
      return said.map(([label, s]) => `; ${label} on ${s.member.process.node} is stopped (${describeStopped(s.member)}) since ${s.since}`).join("");
    },
  };
}
