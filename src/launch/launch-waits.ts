/**
 * The launch's waits: for each stage to listen (or print its ring line), for the HTTP server's
 * health endpoint, and for the first token. Each watches the launch's other processes as it waits,
 * so one that exits ends the wait then, named; each ends at once when the launch is called off.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { Endpoint, EngineReadiness } from "../engines/index.js";
import type { LedgerEntry, LedgerProcess } from "./ledger.js";
import { LaunchError } from "./launch-error.js";
import { addressesListenedByProcess, defaultReachMs, describeEnd, processLabel, readLogTail } from "./processes.js";
import { askCoordinatorHealth, probeOneToken } from "./coordinator-probes.js";
import type { StoppedWatch } from "./stopped-watch.js";
import { waitUntil } from "./wait-until.js";
import { isEveryInterface, joinHostPort, socketCovers, type NodeAccess, type PortAnswer } from "../nodes/index.js";
import { messageOf } from "../errors/index.js";
import { exitedWhileAwaiting, exitError, hostForUrl, livenessOf, tailUnlessSilent, type PortHeld } from "./launch-failures.js";

export async function waitListening(
  node: NodeAccess,
  process: LedgerProcess,
  prober: NodeAccess,
  address: { host: string; port: number },
  wait: Wait,
  stopped: StoppedWatch,
  launch: LaunchInFlight,
  /** Told once when the address has been silent (no answer, not a refusal) for `silentProbes` probes in a row. */
  saySilent: (detail: string) => void,
  /** Told when it answers again after such a silence. */
  sayReached: (detail: string) => void,
): Promise<void> {
  const where = joinHostPort(address.host, address.port);
  const from = prober.config.name;
  // A port not yet bound is refused by its host at once; silence (no answer at all) is the path.
  let last: PortAnswer | undefined;
  let silent = 0;
  const isUp = async (): Promise<boolean> => {
    last = await prober.probePort(address.host, address.port, 1_000).catch(() => undefined);
    // An answer after a silence said (a refusal: the path is back, the port not bound yet) unsays it.
    if (last !== "no-answer" && last !== undefined && silent >= silentProbes) sayReached(`its transport address ${where} answers from ${from} again`);
    silent = last === "no-answer" ? silent + 1 : 0;
    // Said as it happens, not only at the deadline: the launch may wait a minute more.
    if (silent === silentProbes)
      saySilent(
        `its transport address ${where} does not answer from ${from} (no answer, not a refusal, ${silentProbes} probes of 1 s in a row): the path from ${from} to ${process.node} may be down or blocked; waiting until the deadline`,
      );
    return last === "open";
  };
  const pathCut = (): string | undefined =>
    last === "no-answer"
      ? `its transport address ${where} was still silent from ${from} at the deadline (${wait.deadlineMs} ms; no answer, not a refusal): the path from ${from} to ${process.node} is down or blocked`
      : undefined;
  const listensElsewhere = (): Promise<string | undefined> => listeningElsewhere(node, process, launch);
  await waitStageUp(
    node,
    process,
    { isUp, pathCut, listensElsewhere },
    { before: `listening on ${where}`, notDone: `listen on ${where}` },
    { ...wait, intervalMs: 50 },
    stopped,
    launch,
  );
}

/** Probes without an answer in a row after which a stage's silent address is said (each waits 1 s). */
const silentProbes = 2;

/**
 * Bytes of a ring stage's log searched for its ring line, read every 200 ms: the ring forms as the
 * engine starts, and an engine's later output (a progress bar, a flood of warnings) has no bound.
 */
const ringLineWindowBytes = 256 * 1024;

/** Until the stage's log shows `line` (a ring stage that is up); its ports are never probed. */
export async function waitRingLine(node: NodeAccess, process: LedgerProcess, line: RegExp, wait: Wait, stopped: StoppedWatch, launch: LaunchInFlight): Promise<void> {
  const printed = async (): Promise<boolean> => {
    const head = await node.run(["head", "-c", String(ringLineWindowBytes), "--", process.logFile], { deadlineMs: defaultReachMs }).catch(() => undefined);
    return head?.exitCode === 0 && line.test(head.stdout);
  };
  await waitStageUp(node, process, { isUp: printed }, { before: "it joined the ring", notDone: `print /${line.source}/` }, { ...wait, intervalMs: 200 }, stopped, launch);
}

/** How a stage's start is watched: whether it is up, and why not when it runs but is not seen up. */
interface StageProbes {
  isUp: () => Promise<boolean>;
  /** Why the stage, though running, could not be seen up: a path that is cut. Undefined: not known. */
  pathCut?: () => string | undefined;
  /** Where the stage's processes listen instead (`127.0.0.1:39601, [::1]:39600`), asked at the deadline. Undefined: nowhere, or not known. */
  listensElsewhere?: () => Promise<string | undefined>;
}

/**
 * Until `isUp` holds for a stage: StageExited if its process exits first ("… before <before>";
 * PortInUse when its log says its port was taken), StageListenTimeout once the deadline passes
 * ("… did not <notDone> within …"), with its log tail and the launch's processes seen stopped meanwhile.
 * The launch's other started processes are watched too (every 500 ms): stages start together, and
 * one that exits (a crash while loading) while an earlier one still loads ends the wait then,
 * named, rather than at that one's deadline, minutes later with a long load timeout.
 */
async function waitStageUp(
  node: NodeAccess,
  process: LedgerProcess,
  { isUp, pathCut = () => undefined, listensElsewhere = async () => undefined }: StageProbes,
  words: { before: string; notDone: string },
  timing: Wait & { intervalMs: number },
  stopped: StoppedWatch,
  launch: LaunchInFlight,
): Promise<void> {
  const label = processLabel("stage", process.index);
  const liveness = livenessOf(node, process);
  const awaited = { what: `${label} to ${words.notDone}`, until: new Date(Date.now() + timing.deadlineMs) };
  const firstOtherExited = watchLaunchProcesses(launch.entry, launch.nodes, { except: process, everyMs: 500 });
  let otherExited: LedgerProcess | undefined;
  const state = await waitUntil(async () => {
    if (await isUp()) return "up";
    if (!(await liveness.isAliveOrUnknown())) return "exited";
    if ((otherExited = await firstOtherExited()) !== undefined) return "other-exited";
    stopped.look(awaited);
    return undefined;
  }, timing);
  if (state === "up") return stopped.answered(process);
  if (state === "other-exited" && otherExited !== undefined) {
    throw await exitedWhileAwaiting(otherExited, launch, `${label}-listen`, `${label} on ${process.node} to ${words.notDone}`);
  }
  const logTail = await tailUnlessSilent(node, process, liveness);
  const portHeld = launch.portHeld;
  if (state === "exited") {
    throw await exitError(process, `${label} on ${process.node} ${await describeEnd(node, process)} before ${words.before}`, `${label}-listen`, logTail, portHeld);
  }
  // The stage runs (its node answered every liveness probe) and only the path to it is silent:
  // the network's failure, not the cluster's, said as such and not counted against its budget.
  const cut = liveness.silence() === "" ? pathCut() : undefined;
  if (cut !== undefined) {
    throw new LaunchError("StageLinkUnreachable", `${label}-listen`, `${label} on ${process.node} runs, but ${cut}${stopped.words()}`, { logTail });
  }
  // A process that ran all along and was not stopped is most likely still loading its model, unless
  // it listens elsewhere: an engine that binds another address than it is given never comes up.
  const ranAllAlong = liveness.silence() === "" && stopped.words() === "";
  const elsewhere = ranAllAlong ? await listensElsewhere() : undefined;
  const loading = !ranAllAlong
    ? ""
    : elsewhere === undefined
      ? `; it ran all along: a model that takes longer to load needs [engine] load_timeout_seconds (seconds) above its load time`
      : `; it ran all along, listening on ${elsewhere} but not there: an engine that binds another address than its --host and --port (its own configuration, IPv6 only) never listens there; one still loading needs [engine] load_timeout_seconds above its load time`;
  throw new LaunchError(
    "StageListenTimeout",
    `${label}-listen`,
    `${label} on ${process.node} did not ${words.notDone} within ${timing.deadlineMs} ms${liveness.silence()}${stopped.words()}${stopped.diskWords(process)}${loading}`,
    {
      logTail,
    },
  );
}

/**
 * The one-token readiness probe, while every process of the launch is watched for its exit (every
 * 500 ms): an engine may load the model only now (mlx-lm does, once its ring formed and its /health
 * answers), and a process that fails to load exits — the launch fails then, naming it, rather than
 * at the probe's deadline with none named. One seen stopped is said paused, as in the other waits,
 * and named if the probe's deadline passes.
 */
export async function awaitFirstToken(
  url: string,
  readiness: EngineReadiness,
  /** The model name the engine serves: named in the probe when the engine asks for it. */
  model: string,
  { deadlineMs, signal }: Wait,
  launch: LaunchInFlight,
  server: { node: NodeAccess; process: LedgerProcess },
  stopped: StoppedWatch,
): Promise<void> {
  const awaited = { what: `the first token through ${url}${readiness.completionsPath}`, until: new Date(Date.now() + deadlineMs) };
  const firstExited = watchLaunchProcesses(launch.entry, launch.nodes);
  const watching = new AbortController();
  // A launch called off cuts the probe; the caller looks at its own signal first.
  const callOff = (): void => watching.abort();
  signal?.addEventListener("abort", callOff, { once: true });
  if (signal?.aborted === true) callOff();
  let exited: LedgerProcess | undefined;
  const watch = (async () => {
    while (!watching.signal.aborted) {
      // Ended by the abort too: a probe that succeeds is not held up by the watch's pause.
      await delay(500, undefined, { signal: watching.signal }).catch(() => undefined);
      if (watching.signal.aborted) return;
      exited = await firstExited();
      if (exited !== undefined) watching.abort();
      else stopped.look(awaited);
    }
  })();
  try {
    await probeOneToken(url, readiness, deadlineMs, watching.signal, model);
  } catch (error) {
    watching.abort();
    await watch;
    signal?.throwIfAborted();
    // The probe may have failed on the exit itself (a reset connection) before the watch saw it.
    exited ??= await firstExited();
    if (exited !== undefined) {
      throw await exitedWhileAwaiting(exited, launch, "readiness-probe", "the first token (the model loading, or the pipeline forming)", error);
    }
    throw new LaunchError("ReadinessProbeFailed", "readiness-probe", `the one-token readiness probe against ${url} failed: ${messageOf(error)}${stopped.words()}`, {
      logTail: await readLogTail(server.node, server.process),
      cause: error,
    });
  } finally {
    signal?.removeEventListener("abort", callOff);
    watching.abort();
    await watch;
  }
}

export async function waitHealthy(
  node: NodeAccess,
  process: LedgerProcess,
  url: string,
  readiness: EngineReadiness,
  { deadlineMs, signal }: Wait,
  stopped: StoppedWatch,
  launch: LaunchInFlight,
  onOddAnswer: (said: string) => void,
): Promise<void> {
  const health = `${url}${readiness.healthPath}`;
  const liveness = livenessOf(node, process);
  const awaited = { what: `${health} to answer ${readiness.readyStatus}`, until: new Date(Date.now() + deadlineMs) };
  // The launch's other processes are watched too (every 500 ms): a stage or rank that exits while
  // the server loads (out of memory, a model it cannot find) ends the wait then, named, rather than
  // at the deadline with only the server's "still loading" to show.
  const firstOtherExited = watchLaunchProcesses(launch.entry, launch.nodes, { except: process, everyMs: 500 });
  let otherExited: LedgerProcess | undefined;
  // The last answer and how many times in a row it came: a timeout then says what the port said.
  let last = { said: "", times: 0 };
  // The answers said while waiting (their gists: `answered 500`).
  const told = new Set<string>();
  const state = await waitUntil(
    async () => {
      const answer = await askCoordinatorHealth(url, readiness);
      if (answer.healthy) return "healthy";
      const gist = gistOf(answer.said);
      // An answer that is neither "not listening yet" nor "loading" (a 500, a 404) is said while the
      // wait goes on, not only at the deadline minutes later; so is a return to loading after one.
      // Each distinct answer once: an engine that flaps between two must not fill the timeline.
      const odd = answer.said.startsWith("answered ") && !gist.endsWith("(loading)");
      const backToLoading = told.size > 0 && gist.endsWith("(loading)");
      if (gist !== gistOf(last.said) && !told.has(gist) && (odd || backToLoading)) {
        told.add(gist);
        onOddAnswer(answer.said);
      }
      last = { said: answer.said, times: answer.said === last.said ? last.times + 1 : 1 };
      if (!(await liveness.isAliveOrUnknown())) return "exited";
      if ((otherExited = await firstOtherExited()) !== undefined) return "other-exited";
      stopped.look(awaited);
      return undefined;
    },
    { deadlineMs, intervalMs: 100, signal },
  );
  if (state === "healthy") return stopped.answered(process);
  if (state === "other-exited" && otherExited !== undefined) {
    throw await exitedWhileAwaiting(
      otherExited,
      launch,
      "coordinator-health",
      `${health} to answer ${readiness.readyStatus}${last.times === 0 ? "" : ` (it last ${last.said})`}`,
    );
  }
  const logTail = await tailUnlessSilent(node, process, liveness);
  if (state === "exited") {
    const exited = `the coordinator on ${process.node} ${await describeEnd(node, process)} before ${health} answered ${readiness.readyStatus}`;
    throw await exitError(process, exited, "coordinator-health", logTail, launch.portHeld);
  }
  // Nothing listened where it was asked while the server ran: it may listen elsewhere (another
  // port or address than its --host and --port, IPv6 only), which no longer deadline cures.
  const refused = last.said.startsWith("refused") && liveness.silence() === "";
  const at = refused ? await listeningElsewhere(node, process, launch) : undefined;
  const elsewhere =
    at === undefined ? "" : `; its processes listen on ${at} but not there (an engine that binds another address than its --host and --port, or IPv6 only?)`;
  throw new LaunchError(
    "CoordinatorHealthTimeout",
    "coordinator-health",
    `${health} did not answer ${readiness.readyStatus} within ${deadlineMs} ms${last.times === 0 ? "" : `; it last ${last.said}${last.times > 1 ? ` (${last.times} times in a row)` : ""}`}${elsewhere}${liveness.silence()}${stopped.words()}`,
    {
      logTail,
    },
  );
}

/** A wait's deadline, ms, and the launch's call-off, which ends it at once. */
export interface Wait {
  deadlineMs: number;
  signal: AbortSignal | undefined;
}

/**
 * Watches the launch's started processes (all but `except`): each call asks them all at once and
 * returns the first one that has exited, or undefined when all run (or their nodes cannot say).
 * With `everyMs`, a call within that time of the last question asks nothing (undefined): for a wait
 * that polls its own process faster than the others deserve.
 */
function watchLaunchProcesses(
  entry: LedgerEntry,
  nodes: Map<string, NodeAccess>,
  { except, everyMs = 0 }: { except?: LedgerProcess; everyMs?: number } = {},
): () => Promise<LedgerProcess | undefined> {
  const watched = entry.processes.filter((p) => p.pid > 0 && p !== except).map((p) => ({ p, liveness: livenessOf(nodes.get(p.node)!, p) }));
  let askedAt = performance.now();
  // Asked all at once: one silent node (each question waits up to 2 s) must not slow the others' looks.
  return async () => {
    if (performance.now() - askedAt < everyMs) return undefined;
    askedAt = performance.now();
    const alive = await Promise.all(watched.map(({ liveness }) => liveness.isAliveOrUnknown()));
    return watched.find((_, i) => !alive[i])?.p;
  };
}

/** "answered 500: {…}" → "answered 500": what an answer says, without a body that may differ each time. */
function gistOf(said: string): string {
  return said.split(":")[0]!;
}

/** The launch under way, as its waits see it: its ledger entry, its nodes, and whether a stage's port is held. */
export interface LaunchInFlight {
  entry: LedgerEntry;
  nodes: Map<string, NodeAccess>;
  portHeld: PortHeld;
  /** The addresses a process of the launch was given to bind (see boundAddressesOf). */
  binds: (process: LedgerProcess) => Endpoint[];
}

/**
 * Where `process` (and what it started) listens other than the addresses it was given to bind
 * (a coordinator's control address is no news), as `host:port, …`; undefined when nowhere else,
 * or when its node does not say.
 */
async function listeningElsewhere(node: NodeAccess, process: LedgerProcess, launch: LaunchInFlight): Promise<string | undefined> {
  const given = launch.binds(process);
  const at = (await addressesListenedByProcess(node, process))?.filter((socket) => !given.some((g) => g.port === socket.port && socketCovers(socket, g.host)));
  return at === undefined || at.length === 0 ? undefined : at.map((socket) => `${hostForUrl(socket.address)}:${socket.port}`).join(", ");
}

/**
 * The processes of the launch that listen on every interface of their node at a port they were
 * given with one address (an engine that binds 0.0.0.0 whatever `--host` says): what they serve,
 * unauthenticated, is then reached from every network the node is on. Said, not refused: it
 * serves. One question to each node, bounded as a launch's probes are; a node that does not say is
 * passed over.
 */
export async function listeningWider(launch: LaunchInFlight): Promise<string[]> {
  const said = await Promise.all(
    launch.entry.processes.map(async (process) => {
      const given = launch.binds(process).filter((g) => !isEveryInterface(g.host));
      if (given.length === 0) return [];
      const at = (await addressesListenedByProcess(launch.nodes.get(process.node)!, process).catch(() => undefined)) ?? [];
      return at
        .filter((socket) => isEveryInterface(socket.address) && given.some((g) => g.port === socket.port))
        .map(
          (socket) =>
            `${processLabel(process.role, process.index)} on ${process.node} listens on ${hostForUrl(socket.address)}:${socket.port}, every interface of the node, though it was given ${given.find((g) => g.port === socket.port)!.host}: it is reached from every network the node is on (its engine does not bind the address it is given)`,
        );
    }),
  );
  return said.flat();
}
