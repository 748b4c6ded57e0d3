/**
 * Start, inspect and stop the engine processes of a launch. Every process runs detached in its own
 * session under a wrapper that records its exit status, logs to a file in the launch's run
 * directory, and is only ever signalled after its kernel start time matches the ledger. Each also
 * carries a mark in its environment (launchMark), which whatever it starts inherits: what an
 * engine left outside its process group (it put itself in the background) is stopped with it.
 */
import { join } from "node:path";
import { isShardctlError, messageOf, ShardctlError } from "../errors/index.js";
import {
  addressesListenedBy,
  commandFailed,
  launchMark,
  markedProcesses,
  oomNoteOf,
  readTail,
  within,
  type CommandResult,
  type NodeAccess,
  type TcpSocket,
} from "../nodes/index.js";
import type { LedgerProcess, ProcessRole } from "./ledger.js";

/** Label of a process in file names and messages: `stage-0`, `coordinator`. */
export function processLabel(role: ProcessRole, index?: number): string {
  return role === "stage" ? `stage-${index ?? 0}` : "coordinator";
}

/**
 * The ledger record of a process about to start: its files, and pid 0 until it runs. It is
 * written before the start, so a daemon killed between the start and the next ledger write still
 * finds the process (by its exit-status file path, see findUnrecordedProcess) and stops it.
 */
export function plannedProcess(role: ProcessRole, index: number | undefined, nodeName: string, runDir: string): LedgerProcess {
  const label = processLabel(role, index);
  return {
    role,
    ...(index === undefined ? {} : { index }),
    node: nodeName,
    pid: 0,
    startTime: "",
    runDir,
    logFile: join(runDir, `${label}.log`),
    exitFile: join(runDir, `${label}.exit`),
  };
}

/** Start a planned process detached and return its record with pid and start time. */
export async function startEngineProcess(node: NodeAccess, planned: LedgerProcess, argv: string[]): Promise<LedgerProcess> {
  // A previous launch's files would be taken for this one's: an old exit status means "exited".
  await Promise.all([node.remove(planned.logFile), node.remove(planned.exitFile), node.remove(oomNoteOf(planned.exitFile)), node.remove(leftFileOf(planned))]);
  const { pid, startTime } = await node.startDetached(argv, {
    logFile: planned.logFile,
    cwd: planned.runDir,
    exitStatusFile: planned.exitFile,
    // The exit-status file's path is unique to this cluster, node and process.
    env: { [launchMark]: planned.exitFile },
  });
  return { ...planned, pid, startTime };
}

/**
 * A process of a planned record (pid 0) that may have started before its pid was recorded: the
 * wrapper's argv holds the exit-status file path, unique to this cluster, node and process.
 */
export async function findUnrecordedProcess(node: NodeAccess, planned: LedgerProcess): Promise<LedgerProcess | undefined> {
  for (const { pid, args } of await listCommandLines(node)) {
    // The wrapper, or the `env` that sets its mark a moment before it becomes the wrapper.
    if (!args.includes(` ${planned.exitFile} `) || !/^(sh -c|env )/.test(args)) continue;
    const startTime = await node.processStartTime(pid);
    if (startTime !== undefined) return { ...planned, pid, startTime };
  }
  return undefined;
}

/** Every process on `node` with its command line, as `ps` shows it; throws when the node does not list them. */
export async function listCommandLines(node: NodeAccess, ask?: { deadlineMs: number }): Promise<Array<{ pid: number; args: string }>> {
  const listing = await node.run(["ps", "-A", "-ww", "-o", "pid=", "-o", "args="], ask);
  if (listing.exitCode !== 0) throw listingFailed(node.config.name, listing);
  return listing.stdout.split("\n").flatMap((line) => {
    const match = /^\s*(\d+)\s+(.*)$/.exec(line);
    return match === null ? [] : [{ pid: Number(match[1]), args: match[2]! }];
  });
}

/** True while the recorded process (same pid and start time) still runs. */
export async function isProcessAlive(node: NodeAccess, process: Pick<LedgerProcess, "pid" | "startTime">, ask?: { deadlineMs: number }): Promise<boolean> {
  if (process.pid === 0) return false;
  return (await node.processStartTime(process.pid, ask)) === process.startTime;
}

/**
 * How a process ended, e.g. `exited with status 1` or `killed by SIGKILL (status 137)`. The pid
 * recorded is the small `sh` that runs the engine and writes its status as it ends (`ps` shows the
 * engine as its child): with no status written, that `sh` was killed itself, stopped before it
 * started the engine, or its disk was full.
 */
export async function describeExit(node: NodeAccess, process: LedgerProcess): Promise<string> {
  return (await askExit(node, process)).words;
}

/** How long askExit waits to learn whether a process without an exit status still runs, ms. */
const stillRunningDeadlineMs = 2_000;

/**
 * describeExit, and whether the words say how it ended (`known`) or only that its node could not
 * be asked: a node that did not answer is no process that "ended without recording an exit status"
 * (that sent operators looking for a full disk while the status file sat there, unread).
 */
export async function askExit(node: NodeAccess, process: LedgerProcess): Promise<{ words: string; known: boolean }> {
  const record = await readExitRecord(node, process);
  if ("unreadable" in record) return { words: `its exit status could not be read (${record.unreadable})`, known: false };
  if ("status" in record) return { words: await describeStatus(node, process, record.status), known: true };
  // No status yet may be no end yet: a teardown whose signal timed out on a loaded node leaves the
  // process running, and "ended without recording" would send its operator looking for a full disk.
  const still = await node.processStartTime(process.pid, { deadlineMs: stillRunningDeadlineMs }).then(
    (startTime) => ({ running: startTime === process.startTime }),
    (error: unknown) => ({ unasked: messageOf(error) }),
  );
  if ("unasked" in still) return { words: `recorded no exit status, and whether it still runs could not be asked (${still.unasked})`, known: false };
  if (still.running) {
    return { words: "was still running when asked how it ended (a teardown that could not confirm its stop: the next pass stops it)", known: false };
  }
  return {
    words:
      "ended without recording an exit status (the pid is the sh that runs the engine and writes how it ends: that sh was killed itself, stopped before it started the engine, or its disk was full)",
    known: true,
  };
}

/** The exit status the wrapper wrote; none recorded (no file, or not a number); or why its node could not be asked. */
async function readExitRecord(node: NodeAccess, process: LedgerProcess): Promise<{ status: number } | { none: true } | { unreadable: string }> {
  try {
    const text = (await node.readFile(process.exitFile)).toString("utf8").trim();
    return /^\d+$/.test(text) ? { status: Number(text) } : { none: true };
  } catch (error) {
    return isShardctlError(error, "NodeUnreachable") ? { unreadable: messageOf(error) } : { none: true };
  }
}

/**
 * describeExit as a predicate after the process's name: "stage-0 on n1 exited with status 1", "the
 * coordinator on n2 was killed by SIGKILL (status 137)".
 */
export async function describeEnd(node: NodeAccess, process: LedgerProcess): Promise<string> {
  const how = await describeExit(node, process);
  return how.startsWith("killed by ") ? `was ${how}` : how;
}

/** As describeExit, or undefined when the process recorded no exit status. */
export async function describeRecordedExit(node: NodeAccess, process: LedgerProcess): Promise<string | undefined> {
  const record = await readExitRecord(node, process);
  return "status" in record ? describeStatus(node, process, record.status) : undefined;
}

/** How a recorded exit status reads: "exited with status 1", "killed by SIGKILL (status 137)". */
async function describeStatus(node: NodeAccess, process: LedgerProcess, status: number): Promise<string> {
  // The wrapper's shell reports a signal as 128 + its number; signals end at SIGRTMAX (64 on
  // Linux), so 193-255 are statuses the process chose itself (exit(-1) is 255).
  if (status > 128 && status <= 128 + highestSignal)
    return `killed by ${signalName(status - 128)} (status ${status})${status === 128 + 9 ? await oomWords(node, process) : ""}`;
  if (status === 0) {
    // An engine that puts itself in the background: its first process exits 0 at once, and the
    // engine runs on in a session of its own, where supervision cannot see it.
    // Those found now, or those its teardown found and stopped (it may have run first).
    const left = [...new Set([...(await leftRunning(node, process)), ...(await stoppedLeft(node, process))])];
    if (left.length > 0) {
      return `exited with status 0, leaving ${plural(left.length, "process")} in the background (pid ${left.join(", ")}: the engine put itself there (an option to daemonize: shardctl supervises an engine in the foreground, so run it without), or its worker processes outlived it (the engine should stop them as it exits); what it left is stopped with the launch)`;
    }
  }
  return `exited with status ${status}`;
}

/**
 * What a SIGKILL's words add when the kernel's OOM killer killed processes on the node while this
 * one ran (its wrapper noted the count as it started and ended): most likely it was one of them.
 * Nothing when the count stood still (a `kill -9`, a teardown's SIGKILL), off Linux, or unread.
 */
async function oomWords(node: NodeAccess, process: LedgerProcess): Promise<string> {
  const note = await within(
    defaultReachMs,
    node.readFile(oomNoteOf(process.exitFile)).then((b) => b.toString("utf8").trim()),
    undefined,
  ).catch(() => undefined);
  const [, scope, b, a] = /^(cgroup|system) (\d+) (\d+)$/.exec(note ?? "") ?? [];
  const [before, after] = [Number(b), Number(a)];
  if (scope === undefined || !(after > before)) return "";
  const where = scope === "cgroup" ? `in its memory cgroup on ${process.node}` : `on ${process.node} (of any process: this system tells no cgroup's count)`;
  return `: out of memory, most likely — the kernel's OOM killer killed ${plural(after - before, "process")} ${where} while it ran (its node's memory, or its memory cgroup's limit, ran out; \`dmesg\` or \`journalctl -k\` there names each); a smaller share of layers on that node (\`[nodes.${process.node}] memory_limit\`), or more memory there`;
}

/**
 * The processes an exited launch process left running, found by its mark (in its process group or
 * out of it): none when the node cannot say within `defaultReachMs`.
 */
function leftRunning(node: NodeAccess, process: LedgerProcess): Promise<number[]> {
  return markedProcesses(node, process.exitFile, { deadlineMs: defaultReachMs }).catch(() => []);
}

/**
 * The addresses a launched process, and whatever it started (found by its mark), listen on at its
 * node: undefined when the node does not say within 5 s.
 */
export async function addressesListenedByProcess(node: NodeAccess, process: LedgerProcess): Promise<TcpSocket[] | undefined> {
  const marked = await markedProcesses(node, process.exitFile, { deadlineMs: 5_000 }).catch(() => undefined);
  if (marked === undefined) return undefined;
  return addressesListenedBy(node, [...new Set([process.pid, ...marked])]);
}

/** Where stopOrphanedGroup notes the pids a gone wrapper left running, before it stops them. */
function leftFileOf(process: Pick<LedgerProcess, "exitFile">): string {
  return `${process.exitFile}.left`;
}

/** The pids noted in leftFileOf(process): none when there is no note, or the node does not give it. */
async function stoppedLeft(node: NodeAccess, process: LedgerProcess): Promise<number[]> {
  const text = await node.readFile(leftFileOf(process)).then(
    (b) => b.toString("utf8"),
    () => "",
  );
  return text
    .split(/\s+/)
    .filter((word) => /^\d+$/.test(word))
    .map(Number);
}

function plural(count: number, noun: string): string {
  return `${count} ${noun}${count === 1 ? "" : "es"}`;
}

/**
 * An HTTP server's access-log line for a GET of /health (every engine's health path) answered
 * 2xx, as Python's http.server writes it (`127.0.0.1 - - [date] "GET /health HTTP/1.1" 200 -`;
 * mlx_lm.server does) and common log format does: shardctl's own probes, one a second, which
 * filled a tail of 20 lines in 20 s and pushed out the lines that said what went wrong. A probe
 * answered otherwise (503: a broken pipeline) is evidence, and stays.
 */
const healthProbeLine = { pattern: /"(?:GET|HEAD) \/health(?:\?[^"\s]*)? HTTP\/[\d.]+" 2\d\d\b/, what: "of GET /health requests (shardctl's probes) answered 2xx" };

/**
 * The last `count` lines of a process's log (default 20): the evidence kept in the status, without
 * the access-log lines of health probes (one line says how many were left out). None when the
 * node does not give the file within `defaultReachMs`: a failure on a silent (partitioned) node is
 * reported at once, not after its connection has dropped and a reconnection timed out.
 */
export function readLogTail(node: NodeAccess, process: LedgerProcess, count = 20): Promise<string[]> {
  return readTail(node, process.logFile, count, defaultReachMs, { leaveOut: healthProbeLine });
}

/** How stopping went: already gone, pid recycled (refused), stopped by SIGTERM or SIGKILL, or not stopped. */
export type StopOutcome = "gone" | "recycled" | "terminated" | "killed" | "survived" | "orphans-stopped";

/** How stopping asks a node. */
export interface StopOptions {
  /** SIGTERM → SIGKILL grace period, ms. */
  graceMs: number;
  /**
   * Deadline of every question to the node, ms. Default 2000: a node that does not answer within it
   * is not waited for (the process is left for a later pass), whatever the grace period.
   */
  reachMs?: number;
  /**
   * The process was already seen exiting (its exit watch or a liveness probe said so): its start time
   * is not asked again, and only its process group is checked for an engine that outlived it.
   */
  seenGone?: boolean;
  /**
   * Told when the grace period ran out with the process still there, as SIGKILL is sent, what is
   * waited for next ("pid 4100 still ran 5000 ms after SIGTERM: SIGKILL, …"): the teardown's timeline
   * says so while it waits. Default none.
   */
  onKill?: (detail: string) => void;
}

/** Default deadline of one question to a node while stopping, ms. */
export const defaultReachMs = 2_000;

/** Wait for a SIGKILLed process to be reaped, ms. */
const killWaitMs = 5_000;

/**
 * Stop a process: SIGTERM (followed by SIGCONT, so a stopped process acts on it), wait up to
 * `graceMs`, then SIGKILL, and verify it is gone. A pid whose start time does not match the ledger
 * is never signalled. Every question to the node has the `reachMs` deadline, so an unreachable node
 * fails this within it (throwing) instead of holding the caller. Returns how it went, for the timeline.
 */
export async function stopEngineProcess(node: NodeAccess, process: LedgerProcess, graceMsOrOptions: number | StopOptions): Promise<StopOutcome> {
  const options: StopOptions = typeof graceMsOrOptions === "number" ? { graceMs: graceMsOrOptions } : graceMsOrOptions;
  const ask = { deadlineMs: options.reachMs ?? defaultReachMs };
  if (process.pid === 0) {
    const found = await findUnrecordedProcess(node, process);
    // Gone before its pid was recorded (it exited at once, as an engine that puts itself in the
    // background does): what it left carries its mark.
    return found === undefined ? stopOrphanedGroup(node, process, options, ask, "none") : stopEngineProcess(node, found, options);
  }
  if (options.seenGone === true) return stopOrphanedGroup(node, process, options, ask, await endedMomentsAgo(node, process, ask));
  const startTime = await node.processStartTime(process.pid, ask);
  if (startTime === undefined) return stopOrphanedGroup(node, process, options, ask, await endedMomentsAgo(node, process, ask));
  // The pid now belongs to another process: ours is gone, and the other one is not ours to stop
  // (what ours left in the background, carrying its mark, is).
  if (startTime !== process.startTime) return stopMarkedOfRecycled(node, process, options, ask);
  if (!(await node.signal(process.pid, "SIGTERM", process.startTime, ask))) {
    // Refused: the process exited between the look and the signal (then its group may still hold
    // an engine), or its pid was taken by another process meanwhile.
    const now = await node.processStartTime(process.pid, ask);
    if (now === undefined || now === process.startTime) return stopOrphanedGroup(node, process, options, ask, "whole-group");
    return stopMarkedOfRecycled(node, process, options, ask);
  }
  let outcome: StopOutcome = "terminated";
  if (!(await waitGone(node, process, options.graceMs, ask))) {
    options.onKill?.(`pid ${process.pid} still ran ${options.graceMs} ms after SIGTERM: SIGKILL, then up to ${killWaitMs} ms for it to go`);
    await node.signal(process.pid, "SIGKILL", process.startTime, ask);
    if (!(await waitGone(node, process, killWaitMs, ask))) return "survived";
    outcome = "killed";
  }
  // The wrapper was ours a moment ago, so its group still is: what the engine started and left
  // there (a helper that ignores SIGTERM, a child the engine never waited for) goes with it.
  return (await stopOrphanedGroup(node, process, options, ask, "whole-group")) === "survived" ? "survived" : outcome;
}

/**
 * Which members of a gone wrapper's process group are provably ours. "whole-group": every one —
 * the wrapper led it moments ago, and a group id cannot be taken by a new group while any member
 * of the old one lives. "naming-run-dir": only those whose command line names this launch's run
 * directory, for a wrapper gone for an unknown time (its group may have emptied and its id been
 * taken since, by processes that never name our run directory). "none": the wrapper's pid is
 * another process's now, so is its group (or it was never recorded). Processes carrying the
 * wrapper's launch mark are ours whichever it is.
 */
type GroupMembers = "whole-group" | "naming-run-dir" | "none";

/** A wrapper whose pid another process has now: only what it left carrying its mark is ours; "recycled" when nothing is. */
async function stopMarkedOfRecycled(node: NodeAccess, process: LedgerProcess, options: StopOptions, ask: { deadlineMs: number }): Promise<StopOutcome> {
  const left = await stopOrphanedGroup(node, process, options, ask, "none");
  return left === "gone" ? "recycled" : left;
}

/**
 * How long ago, at most, the wrapper's exit file was written for its whole group to count as ours,
 * s: a pid cannot come round again within seconds.
 */
const momentsS = 10;

/**
 * "whole-group" when the wrapper recorded its engine's exit at most `momentsS` seconds ago (by the
 * node's own clock); otherwise, or when it recorded none (killed itself), "naming-run-dir".
 */
async function endedMomentsAgo(node: NodeAccess, process: LedgerProcess, ask: { deadlineMs: number }): Promise<GroupMembers> {
  const script = 'm=$(stat -c %Y -- "$1" 2>/dev/null || stat -f %m -- "$1" 2>/dev/null) || exit 0; echo $(( $(date +%s) - m ))';
  const result = await node.run(["sh", "-c", script, "sh", process.exitFile], ask);
  const age = Number(result.stdout.trim());
  return result.exitCode === 0 && result.stdout.trim() !== "" && age >= -1 && age <= momentsS ? "whole-group" : "naming-run-dir";
}

/**
 * Longest a reachable node may take to stop a process with these options, ms: the wrapper's grace
 * and SIGKILL wait, then its group's (a helper that ignores SIGTERM gets a grace of its own), and
 * the questions asked on the way, each within `reachMs`.
 */
export function stopBoundMs(options: StopOptions): number {
  const reach = options.reachMs ?? defaultReachMs;
  return 2 * (options.graceMs + killWaitMs) + 10 * reach;
}

/** True once the process (its pid at its start time) is gone, within `deadlineMs`; each question bounded by `ask`. */
export async function waitGone(node: NodeAccess, process: Pick<LedgerProcess, "pid" | "startTime">, deadlineMs: number, ask: { deadlineMs: number }): Promise<boolean> {
  const deadline = performance.now() + deadlineMs;
  while (performance.now() < deadline) {
    if (!(await isProcessAlive(node, process, ask))) return true;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return !(await isProcessAlive(node, process, ask));
}

/**
 * The wrapper (the group leader) is gone, but its engine, or what the engine started, may live on
 * in the process group it led (someone killed the wrapper rather than the engine; a helper ignored
 * SIGTERM; the engine crashed and left children), or outside it, in a session of its own (an engine
 * that put itself in the background). Only processes that are provably ours are stopped (see
 * GroupMembers): live (not zombie) processes of that group, and those carrying the wrapper's mark.
 */
async function stopOrphanedGroup(
  node: NodeAccess,
  process: LedgerProcess,
  options: StopOptions,
  ask: { deadlineMs: number },
  members: GroupMembers,
): Promise<StopOutcome> {
  const ours = async (): Promise<number[]> => {
    // "none" has no group to list: only the mark is asked.
    const [listing, marked] = await Promise.all([
      members === "none" ? undefined : node.run(["ps", "-A", "-ww", "-o", "pgid=", "-o", "stat=", "-o", "pid=", "-o", "args="], ask),
      markedProcesses(node, process.exitFile, ask),
    ]);
    if (listing === undefined) return marked;
    // An empty listing from a command that failed or timed out is not "nothing of ours runs".
    if (listing.exitCode !== 0) throw listingFailed(node.config.name, listing);
    const inGroup = listing.stdout
      .split("\n")
      .map((line) => /^\s*(\d+)\s+(\S+)\s+(\d+)\s+(.*)$/.exec(line))
      .filter(
        (m): m is RegExpExecArray =>
          m !== null && m[1] === String(process.pid) && !m[2]!.startsWith("Z") && (members === "whole-group" || m[4]!.includes(process.runDir)),
      )
      .map((m) => Number(m[3]));
    return [...new Set([...inGroup, ...marked])];
  };
  const signalAll = async (signal: "TERM" | "KILL", pids: number[]): Promise<void> => {
    if (pids.length === 0) return;
    await node.run(["kill", "-s", signal, ...pids.map(String)], ask);
    if (signal === "TERM") await node.run(["kill", "-s", "CONT", ...pids.map(String)], ask);
  };
  /** What of ours is still there after up to `ms` (none as soon as all are gone). */
  const leftAfter = async (ms: number): Promise<number[]> => {
    const deadline = performance.now() + ms;
    for (;;) {
      const left = await ours();
      if (left.length === 0 || performance.now() >= deadline) return left;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  };
  let pids = await ours();
  if (pids.length === 0) return "gone";
  // Noted first: how the process ended is often read after this teardown (describeExit), and what
  // it left running is part of that (an engine that put itself in the background).
  await node.writeFile(leftFileOf(process), `${pids.join(" ")}\n`).catch(() => undefined);
  await signalAll("TERM", pids);
  pids = await leftAfter(options.graceMs);
  if (pids.length === 0) return "orphans-stopped";
  options.onKill?.(`pids ${pids.join(", ")} it left (in its process group, or carrying its mark) still ran ${options.graceMs} ms after SIGTERM: SIGKILL`);
  await signalAll("KILL", pids);
  // A SIGKILLed process is listed until the kernel has torn it down (a moment, longer on a loaded
  // machine): waited for as the wrapper's own SIGKILL is, before it is said to have survived.
  return (await leftAfter(killWaitMs)).length === 0 ? "orphans-stopped" : "survived";
}

/** A listing that failed, or got no answer in time (an empty listing then is not "nothing of ours runs"). */
function listingFailed(nodeName: string, result: CommandResult): ShardctlError {
  return commandFailed(nodeName, result.timedOut ? "NodeUnreachable" : "NodeCommandFailed", "list processes", result);
}

/** SIGRTMAX on Linux: the highest signal number a process can be killed by. */
const highestSignal = 64;

/**
 * The signals whose numbers Linux and macOS share (nodes run either): others, SIGBUS or SIGUSR1 say,
 * have another number on each, so they are said by number.
 */
const signalNames: Record<number, string> = {
  1: "SIGHUP",
  2: "SIGINT",
  3: "SIGQUIT",
  4: "SIGILL",
  5: "SIGTRAP",
  6: "SIGABRT",
  8: "SIGFPE",
  9: "SIGKILL",
  11: "SIGSEGV",
  13: "SIGPIPE",
  14: "SIGALRM",
  15: "SIGTERM",
};

function signalName(n: number): string {
  return signalNames[n] ?? `signal ${n}`;
}
