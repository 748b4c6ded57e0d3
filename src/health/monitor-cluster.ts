/**
 * Continuous health of a running cluster. Process death is learned from exit watches (a long-lived
 * command on the process's node that returns the moment it exits), with polling as the fallback.
 *
 * Every check runs on its own loop — one per node for the liveness of the processes it runs, one
 * per stage for its transport port, one for the coordinator's /health — each probe with its own
 * deadline (`probeTimeoutMs`, 1000 ms), so a silent node never holds up the judgement of another.
 *
 * Only evidence of a broken pipeline ends the cluster (`onDeath`, at most once; the monitor then
 * stops itself):
 * - a process seen gone (its start time no longer matches): at once, unless its engine says it
 *   exited because a peer's link closed — then that peer is looked for, up to `lostPeerWindowMs`
 *   (500 ms), and blamed when it is gone too (judge-exit.ts);
 * - the coordinator's /health answering anything but ready, or refusing, `strikes` (2) times in a
 *   row; silence (no answer within the deadline) `strikes + 1` times, since a busy coordinator may
 *   answer late — but not while every member's node misses its liveness probes too (the daemon
 *   cut off from the cluster: see defaultCutOffGraceMs), for up to `cutOffGraceMs` (5 min), during
 *   which the generation watchdog's timeouts are not judged either;
 * - a stage's transport port refused, or silent from the coordinator's node while that node itself
 *   answers, `strikes` times in a row (each probe tries several staggered connects, so packet loss
 *   alone does not read as silence);
 * - of these, a refusal or an answer is first checked against every member's liveness: a member
 *   gone meanwhile (its exit not seen yet) is judged and blamed instead, the finding being its
 *   consequence;
 * - in an engine whose /health answers 200 through a hung pipeline (it has a generation watchdog):
 *   a member's process seen stopped (SIGSTOP, a tracer) `strikes` times in a row, or a one-token
 *   completion that outlives the watchdog's deadline.
 * Losing the control channel to a node is not such evidence: when its liveness probes go unanswered
 * `strikes` times in a row the node is reported unobservable (`onUnobservable`), the cluster keeps
 * serving, the probes keep trying (the SSH pool reconnects), and `onObservable` follows once it
 * answers again.
 *
 * Bound with the defaults (poll 1000 ms, deadline 1000 ms, 2 strikes): a partitioned stage node is
 * judged within 1 s (until the next probe) + 2 × 1 s (two silent probes) = 3 s of the partition.
 */
import { setMaxListeners } from "node:events";
import { defaultEngineKind, engineOf, type EngineReadiness, type GenerationWatchdog } from "../engines/index.js";
import { httpServerOf, labelOf, proberNodeName, stagesOf, transportPortOf } from "./labels.js";
import {
  defaultProbeTimeoutMs,
  healthInWords,
  probeCoordinatorHealth,
  probeGeneration,
  probeLiveness,
  probeProgress,
  probeTransportPort,
  readinessOf,
  shouldProbeTransport,
  slowPathTimeoutMs,
} from "./probes.js";
import { blamedForLostLink, consequenceOf } from "./describe-death.js";
import { judgeExit } from "./judge-exit.js";
import { PromptProgress } from "./prompt-progress.js";
import { alsoStopped, describeStopped, lookForStoppedMembers } from "./stopped-members.js";
import { StrikeCounter } from "./strike-counter.js";
import type { CutOffEvent, DeathConsequence, DeathEvent, DeathReason, HealthDeps, ObservabilityEvent, WatchedCluster, WatchedProcess } from "./types.js";
import { joinHostPort, readTail, untilAborted } from "../nodes/index.js";

/** Lines kept of a log's end when the whole of it is wanted (the last 64 KiB read hold fewer). */
const allLogLines = 1_000_000;

export interface MonitorOptions extends HealthDeps {
  onDeath: (event: DeathEvent) => void;
  /** A node stopped answering its liveness probes (the control channel is lost); the pipeline may still serve. */
  onUnobservable?: (event: ObservabilityEvent) => void;
  /** A node reported unobservable answers again. */
  onObservable?: (event: ObservabilityEvent) => void;
  /** The daemon reaches none of the cluster's nodes and the coordinator is silent (see defaultCutOffGraceMs); and once that ends. */
  onCutOff?: (event: CutOffEvent) => void;
  /** Time from the start of one probe of a check to the start of its next, ms. Default 1000. */
  pollIntervalMs?: number;
  /** Consecutive failed probes of a check before it is judged. Default 2. */
  strikes?: number;
  /** Start exit watches (polling alone when false). Default true. */
  exitWatch?: boolean;
  /** Pause before restarting an exit watch that ended without the process ending, ms. Default 1000. */
  rewatchDelayMs?: number;
  /**
   * How long in all the exit of a process that says it lost a peer's link waits for that peer to be
   * seen gone, ms. Default 500 (`defaultLostPeerWindowMs`).
   */
  lostPeerWindowMs?: number;
  /** Replaces the engine's generation watchdog timings (tests shorten them). Default: the engine's. */
  generationWatchdog?: { intervalMs: number; timeoutMs: number };
  /**
   * How long silence is not held against a cluster while the daemon reaches none of its nodes (every
   * member on a remote node that misses its liveness probes), ms. Default 300000 (`defaultCutOffGraceMs`).
   */
  cutOffGraceMs?: number;
  /**
   * Nodes already known not to answer (a teardown just failed to reach them): taken as unobservable
   * from the start, without an `onUnobservable`, so their very first answer is an `onObservable`.
   * Default none.
   */
  silentAtStart?: readonly string[];
}

export interface ClusterMonitor {
  /** Stop watching and polling; resolves once every watcher and probe in flight has ended. */
  stop(): Promise<void>;
  /** Nodes currently reported unobservable, with why. */
  unobservable(): ReadonlyMap<string, string>;
  /** Whether a member was seen gone and its death is being judged (which went first), not yet reported. */
  judging(): boolean;
}

/**
 * How long after its node last missed a liveness round a member's word on silent peers is not
 * taken, ms (10 s): a link cut and healed every few seconds leaves the member on it hearing nothing
 * from healthy peers, and its exit, seen after a heal, would name one of them.
 */
const flakyPathMs = 10_000;

/**
 * How long silence is not held against a cluster while the daemon reaches none of its nodes, ms
 * (5 minutes, as long as Kubernetes leaves the pods of a node that stopped answering). When the
 * machine running the daemon loses its own network (a laptop off its Wi-Fi, a switch port), its
 * probes of the coordinator go unanswered exactly as they would if the coordinator's node were cut
 * off, while the pipeline — all of it on nodes that still reach each other — may serve its clients
 * throughout; a teardown then could not even reach the processes, and the next pass after the heal
 * would stop a cluster that never stopped serving, spending its restart budget. So silence alone is
 * no death while no node of the cluster answers: the passes say the daemon is cut off, and the
 * cluster is judged again once a node answers. A cluster all of whose nodes stay silent longer (lost
 * power, or a network that does not come back) is then judged by its silence as before. The
 * daemon's setting `[daemon] cut_off_grace_seconds` (300) chooses it.
 */
export const defaultCutOffGraceMs = 300_000;

/**
 * Failed answers in a row to the generation watchdog's probe (a server error other than 503, or a
 * 200 that is no completion) that are a death: one may be a request's bad luck, two a second apart
 * or more are the engine's.
 */
const failedAnswersToDie = 2;

export function monitorCluster(cluster: WatchedCluster, options: MonitorOptions): ClusterMonitor {
  const { pollIntervalMs = 1_000, strikes: limit = 2, exitWatch = true, rewatchDelayMs = 1_000 } = options;
  const timeoutMs = options.probeTimeoutMs ?? defaultProbeTimeoutMs;
  const slowPathMs = options.slowPathTimeoutMs ?? slowPathTimeoutMs(timeoutMs);
  const readiness = readinessOf(cluster);
  const engineName = engineOf(cluster.engine ?? defaultEngineKind).name;
  const controller = new AbortController();
  // `work`'s answer, or `otherwise` as soon as the monitor stops: stop() waits for its checks, and a
  // check held by a long question would hold it.
  const untilStopped = <T>(work: Promise<T>, otherwise: T): Promise<T> => untilAborted(work, controller.signal, () => otherwise);
  // One listener per exit watch and per check loop's pause: more than the default 10 on a large cluster.
  setMaxListeners(0, controller.signal);
  const strikes = new StrikeCounter(limit);
  /** The nodes the cluster's processes run on, each once. */
  const memberNodes = [...new Set(cluster.processes.map((p) => p.node))];
  const pending = new Set<Promise<void>>();
  /** Per node: consecutive unanswered liveness rounds. */
  const unanswered = new Map<string, number>();
  /** Per node: when a liveness round last went unanswered (performance.now(), ms). */
  const lastUnanswered = new Map<string, number>();
  // A member whose node missed a liveness round this recently sits behind a path that comes and
  // goes (a flapping link): what it says of peers it stopped hearing says only that nothing reached it.
  const lately = (times: Map<string, number>, node: string): boolean => performance.now() - (times.get(node) ?? Number.NEGATIVE_INFINITY) < flakyPathMs;
  const behindFlakyPath = (node: string): boolean => lately(lastUnanswered, node);
  /** Per node: when it last missed `limit` liveness rounds in a row (performance.now(), ms). */
  const lastSilent = new Map<string, number>();
  // A node that missed that many rounds within 10 s sits behind a path that comes and goes: what its
  // members say of their peers is no witness. (One missed round alone may be a loaded machine.)
  const wentSilentLately = (node: string): boolean => lately(lastSilent, node);
  const unobservable = new Map<string, string>();
  for (const node of options.silentAtStart ?? []) {
    unanswered.set(node, limit);
    lastSilent.set(node, performance.now());
    unobservable.set(node, "did not answer before the watch began");
  }
  let done = false;

  const track = (work: Promise<void>): void => {
    pending.add(work);
    void work.finally(() => pending.delete(work));
  };

  const die = (process: WatchedProcess, reason: DeathReason, detail: string, unheard = false, consequences: DeathConsequence[] = []): void => {
    if (done) return;
    done = true;
    controller.abort();
    const flakyNodes = memberNodes.filter(wentSilentLately);
    const seenGone = [...gone.keys()].map(labelOf);
    options.onDeath({
      cluster: cluster.cluster,
      label: labelOf(process),
      node: process.node,
      reason,
      detail,
      at: new Date().toISOString(),
      ...(unheard ? { unheard: true as const } : {}),
      ...(flakyNodes.length > 0 ? { flakyNodes } : {}),
      ...(consequences.length > 0 ? { consequences } : {}),
      ...(seenGone.length > 0 ? { gone: seenGone } : {}),
    });
  };
  const diedReason = (process: WatchedProcess): DeathReason => (process.role === "stage" ? "StageDied" : "CoordinatorDied");

  // Processes seen gone, with how they were seen (`pid 4242 exited`). The first is judged before it
  // is declared a death: it may have exited because a peer died a moment before (judge-exit.ts).
  const gone = new Map<WatchedProcess, string>();
  const exited = (process: WatchedProcess, detail: string): void => {
    if (!gone.has(process)) gone.set(process, detail);
    if (done || gone.size > 1) return;
    track(
      (async () => {
        // A judgement that fails (a peer's log unreadable in a way its own checks did not foresee)
        // still ends in a death: the exit seen first is blamed, as before judging existed.
        const { blamed, consequences, lostUnseen } = await judgeExit(process, {
          cluster,
          nodeFor: options.nodeFor,
          ...(options.lostPeerWindowMs === undefined ? {} : { windowMs: options.lostPeerWindowMs }),
          seenGone: (p) => gone.has(p),
          signal: controller.signal,
        }).catch(() => ({ blamed: process, consequences: [], lostUnseen: undefined }));
        const seen = (p: WatchedProcess): string => gone.get(p) ?? `pid ${p.pid} is no longer running`;
        die(
          blamed,
          diedReason(blamed),
          lostUnseen === undefined ? seen(blamed) : blamedForLostLink(seen(blamed), lostUnseen.report, lostUnseen.peer),
          behindFlakyPath(blamed.node),
          consequences.map(({ process: p, report, after }) =>
            report === undefined
              ? { label: labelOf(p), node: p.node, detail: `${seen(p)}${after === undefined ? "" : ` ${after}`}` }
              : consequenceOf(labelOf(p), p.node, seen(p), report),
          ),
        );
      })(),
    );
  };
  const labelsOn = (node: string): string[] => cluster.processes.filter((p) => p.node === node).map(labelOf);

  // A node answered (or did not): track whether the control channel to it works.
  const answered = (node: string): void => {
    unanswered.set(node, 0);
    // Reached again: a later cut-off has its grace afresh.
    cutOffSince = undefined;
    tellCutOff(false);
    if (!unobservable.delete(node) || done) return;
    options.onObservable?.({ cluster: cluster.cluster, node, labels: labelsOn(node), detail: "answers again", at: new Date().toISOString() });
  };
  const silent = (node: string, error: string): void => {
    lastUnanswered.set(node, performance.now());
    const count = (unanswered.get(node) ?? 0) + 1;
    unanswered.set(node, count);
    if (count >= limit) lastSilent.set(node, performance.now());
    if (count < limit || unobservable.has(node) || done) return;
    const detail = `${count} liveness probes in a row got no answer: ${error}`;
    unobservable.set(node, detail);
    options.onUnobservable?.({ cluster: cluster.cluster, node, labels: labelsOn(node), detail, at: new Date().toISOString() });
  };
  // A node answers its liveness probes (local ones always): the node that probes transport ports is
  // trusted to report silence only while it does.
  const nodeAnswers = (node: string): boolean => options.nodeFor(node).kind === "local" || (unanswered.get(node) ?? 0) === 0;
  // Since when the daemon reaches none of the cluster's nodes (performance.now(), ms), while it does.
  let cutOffSince: number | undefined;
  const cutOffGraceMs = options.cutOffGraceMs ?? defaultCutOffGraceMs;
  /** Whether the daemon reaches none of the cluster's nodes: every member on a remote node that misses its liveness probes. */
  const cutOff = (): boolean => {
    const all = memberNodes.length > 0 && memberNodes.every((node) => !nodeAnswers(node));
    if (!all) cutOffSince = undefined;
    else cutOffSince ??= performance.now();
    return all;
  };
  /** Whether silence says nothing of the cluster now: the daemon is cut off from all of it, for less than the grace so far. */
  const blindedByCutOff = (): boolean => {
    const all = cutOff();
    const blinded = all && performance.now() - cutOffSince! < cutOffGraceMs;
    // Past the grace the report stands: nothing answered, and the death that follows replaces it.
    if (blinded || !all) tellCutOff(blinded);
    return blinded;
  };
  // Since when the cut-off was reported (wall clock, ISO), while it was.
  let toldCutOffSince: string | undefined;
  const tellCutOff = (blinded: boolean): void => {
    if (done || blinded === (toldCutOffSince !== undefined)) return;
    const since = toldCutOffSince ?? new Date(Date.now() - (performance.now() - cutOffSince!)).toISOString();
    toldCutOffSince = blinded ? since : undefined;
    options.onCutOff?.({ cluster: cluster.cluster, nodes: memberNodes, since, graceMs: cutOffGraceMs, ...(blinded ? {} : { ended: true as const }) });
  };
  /** What a death by silence adds when it comes after the grace. */
  const afterCutOff = (): string =>
    cutOff() ? `; none of its nodes (${memberNodes.join(", ")}) has answered the daemon for ${Math.round((performance.now() - cutOffSince!) / 1000)} s` : "";

  // Watch every process's exit.
  const watch = async (process: WatchedProcess): Promise<void> => {
    const node = options.nodeFor(process.node);
    while (!controller.signal.aborted) {
      try {
        await node.watchExit(process.pid, process.startTime, { signal: controller.signal });
      } catch {
        // The watch could not run (node unreachable): polling covers this process meanwhile.
      }
      if (controller.signal.aborted) return;
      // A watch also ends when its channel drops: confirm before declaring a death.
      const { state } = await probeLiveness(node, process, { deadlineMs: timeoutMs });
      if (state === "gone") return exited(process, `pid ${process.pid} exited`);
      await sleep(rewatchDelayMs, controller.signal);
    }
  };
  if (exitWatch) for (const process of cluster.processes) track(watch(process));

  // Liveness, per node: every process it runs, at once.
  const checkNode = async (name: string): Promise<void> => {
    const node = options.nodeFor(name);
    const processes = cluster.processes.filter((p) => p.node === name);
    const ask = (deadlineMs: number) => Promise.all(processes.map(async (process) => ({ process, probe: await probeLiveness(node, process, { deadlineMs }) })));
    let probes = await ask(timeoutMs);
    // A slow control channel is not a lost one, as for transport probes: a round that would make
    // the last strike is asked again with room for a long round trip (a link between houses, a
    // VPN, a link saturated by a model's transfer: an SSH command there takes 3 round trips, over
    // a second from 200 ms each way), while the node's connection is up. One that dropped (a
    // refused or silent node) is no slowness.
    const lastStrike = (unanswered.get(name) ?? 0) + 1 >= limit;
    if (!done && slowPathMs > 0 && lastStrike && node.connected !== false && probes.every((p) => p.probe.state === "unknown"))
      probes = await untilStopped(ask(slowPathMs), probes);
    if (done) return;
    const found = probes.filter((p) => p.probe.state === "gone");
    for (const { process } of found) exited(process, `pid ${process.pid} is no longer running`);
    if (found.length > 0) return;
    if (probes.some((p) => p.probe.state === "alive")) return answered(name);
    silent(name, probes.find((p) => p.probe.error !== undefined)?.probe.error ?? "no answer");
  };

  // A refused port or a coordinator answering "not ready" is a symptom as often as a cause: a member
  // that died a moment ago closes its neighbours' links, and they exit or report a broken pipeline,
  // while its own exit is not seen yet (an exit watch is a 100 ms poll on its node, late on a busy
  // one). So before such a finding is declared, every member's liveness is asked (each probe bounded
  // by the probe deadline): any seen gone is judged as an exit is (judge-exit.ts) and blamed instead.
  // Silence is declared at once: a cut node's probes would only add their deadline to the bound.
  const declareUnlessSomeoneDied = async (process: WatchedProcess, reason: DeathReason, detail: string): Promise<void> => {
    const probes = await Promise.all(
      cluster.processes.map(async (member) => ({ member, probe: await probeLiveness(options.nodeFor(member.node), member, { deadlineMs: timeoutMs }) })),
    );
    if (done) return;
    const found = probes.filter((p) => p.probe.state === "gone");
    if (found.length === 0) return die(process, reason, detail);
    for (const { member } of found) exited(member, `pid ${member.pid} is no longer running`);
  };

  // A stage's transport port, from the coordinator's node: the path the pipeline itself uses.
  const checkTransport = async (process: WatchedProcess, proberName: string, host: string, port: number): Promise<void> => {
    const key = `${labelOf(process)}:transport`;
    let answer = await probeTransportPort(options.nodeFor(proberName), host, port, timeoutMs);
    // A slow path is not a cut one: over a link whose round trip passes the probe's deadline (a
    // long or saturated link, its buffers full while a model is staged over it) the answer comes
    // late, so silence that would make the last strike is asked again with a deadline that has
    // room for it first (not waited for once the monitor stops).
    if (answer === "no-answer" && slowPathMs > 0 && strikes.count(key) + 1 >= limit && !done) {
      answer = await untilStopped(probeTransportPort(options.nodeFor(proberName), host, port, slowPathMs), "unknown");
    }
    if (done) return;
    if (answer === "open") return strikes.clear(key);
    if (answer === "unknown" || (answer === "no-answer" && !nodeAnswers(proberName))) return;
    // New connections go unanswered while the pipeline's own links vouch for themselves and the
    // stage's node answers its liveness probes: no cut host, but a path new connections cannot
    // take. Left to the passes, which show the cluster Degraded (ProbeUnanswered) while it serves.
    if (answer === "no-answer" && readiness.healthCoversLinks === true && coordinatorReady() && nodeAnswers(process.node)) return strikes.clear(key);
    const how = answer === "refused" ? "refused" : `silent from ${proberName} (no answer, not a refusal: the path to ${process.node} is cut)`;
    if (!strikes.strike(key)) return;
    const detail = `transport ${joinHostPort(host, port)} was ${how} for ${limit} probes in a row`;
    if (answer === "refused") return declareUnlessSomeoneDied(process, "StagePortClosed", detail);
    die(process, "StagePortClosed", detail, true);
  };

  // Whether the coordinator's last /health probe went unanswered: the generation watchdog's silence
  // says nothing of the pipeline only while the coordinator is silent too (a cut-off daemon).
  let healthSilent = false;
  // The coordinator's /health, from the control machine. When its current run of silent probes
  // began (performance.now(), ms), the first probe's deadline included.
  let silentSince: number | undefined;
  // When its last answer was ready (performance.now(), ms); undefined once it answered otherwise.
  let readyAt: number | undefined;
  // Ready at its last answer, no older than two polls: a probe under way is not taken for ready.
  const coordinatorReady = (): boolean => readyAt !== undefined && performance.now() - readyAt <= 2 * pollIntervalMs + timeoutMs;
  const checkCoordinator = async (coordinator: WatchedProcess, url: string): Promise<void> => {
    let answer = await probeCoordinatorHealth(url, readiness, timeoutMs);
    // A slow path is not a cut one, as for transport probes: over a link whose round trip passes
    // the probe's deadline (a daemon far from its coordinator, a link saturated by a model's
    // transfer) every answer comes late, so silence that would make the last strike is asked again
    // with room for it first (not waited for once the monitor stops).
    if (answer.health === "unknown" && slowPathMs > 0 && !done && strikes.count("coordinator:health") + 1 >= limit + 1 && !blindedByCutOff()) {
      answer = await untilStopped(probeCoordinatorHealth(url, readiness, slowPathMs), answer);
    }
    const health = answer.health;
    if (done) return;
    healthSilent = health === "unknown";
    if (health !== "unknown") {
      // With health_silence_seconds, silence and definite answers are counted apart: an engine that
      // answers at last, after a long request, with one refusal or 503 has not answered badly twice.
      if (silentSince !== undefined && cluster.healthSilenceSeconds !== undefined) strikes.clear("coordinator:health");
      silentSince = undefined;
    }
    // Silence (a busy coordinator answering late) says nothing against the last ready answer; a definite answer does.
    if (health === "ok") readyAt = performance.now();
    else if (health !== "unknown") readyAt = undefined;
    if (health !== "unknown") {
      cutOffSince = undefined;
      tellCutOff(false);
    }
    if (health === "ok") return strikes.clear("coordinator:health");
    // Silence while the daemon reaches none of the cluster's nodes is no strike: its own network is
    // the likeliest fault. Counted afresh once a node answers, or once the grace has passed.
    if (health === "unknown" && blindedByCutOff()) {
      strikes.clear("coordinator:health");
      silentSince = undefined;
      return;
    }
    // Any answer but "ready" counts; a run ends the cluster at `strikes` when its last answer is a
    // definite one, and at `strikes + 1` when it is silence (and, with the definition's
    // health_silence_seconds, once the silence has lasted that long: a busy engine may answer late).
    strikes.strike("coordinator:health");
    const count = strikes.count("coordinator:health");
    if (health === "unknown") silentSince ??= performance.now() - timeoutMs;
    const silentMs = silentSince === undefined ? 0 : performance.now() - silentSince;
    const detail =
      health === "unknown" && cluster.healthSilenceSeconds !== undefined
        ? `${url}${readiness.healthPath} was silent for ${Math.round(silentMs / 1000)} s (${count} probes in a row; [engine] health_silence_seconds = ${cluster.healthSilenceSeconds})`
        : `${url}${readiness.healthPath} was ${health === "unknown" ? "silent" : healthInWords(answer)} for ${count} probes in a row`;
    if (count >= limit && health !== "unknown") return declareUnlessSomeoneDied(coordinator, "CoordinatorUnhealthy", detail);
    const silentLongEnough = cluster.healthSilenceSeconds === undefined || silentMs >= cluster.healthSilenceSeconds * 1000;
    if (count >= limit + 1 && silentLongEnough) die(coordinator, "CoordinatorUnhealthy", `${detail}${afterCutOff()}`);
  };

  // Each check on its own loop: a probe starts `pollIntervalMs` after the previous one started, or
  // as soon as it ended when it took longer (never two of one check at once).
  const loop = (check: () => Promise<void>): void => {
    track(
      (async () => {
        await sleep(pollIntervalMs, controller.signal);
        while (!controller.signal.aborted && !done) {
          const started = performance.now();
          await check().catch(() => undefined);
          await sleep(Math.max(0, pollIntervalMs - (performance.now() - started)), controller.signal);
        }
      })(),
    );
  };
  for (const name of memberNodes) loop(() => checkNode(name));
  const proberName = proberNodeName(cluster);
  if (proberName !== undefined && shouldProbeTransport(cluster)) {
    for (const process of stagesOf(cluster)) {
      const port = transportPortOf(cluster, process.index ?? 0);
      if (port !== undefined) loop(() => checkTransport(process, proberName, port.host, port.port));
    }
  }
  const server = httpServerOf(cluster, readiness.httpServer);
  const url = cluster.coordinatorUrl;
  if (server !== undefined && url !== undefined) loop(() => checkCoordinator(server, url));

  // Stopped members of one node, from its process listing.
  const checkStopped = async (name: string): Promise<void> => {
    const { stopped, answered } = await lookForStoppedMembers(cluster, options.nodeFor, timeoutMs, name);
    if (done) return;
    // A node that did not answer this look says nothing either way: its members keep their strikes
    // (cleared, a node too slow to answer two looks in a row would never be judged).
    if (!answered.has(name)) return;
    for (const process of cluster.processes.filter((p) => p.node === name)) {
      const member = stopped.find((s) => s.process === process);
      const key = `${labelOf(process)}:stopped`;
      if (member === undefined) strikes.clear(key);
      else if (strikes.strike(key))
        return die(process, "ProcessStopped", `stopped (${describeStopped(member)}) for ${limit} probes in a row: the ${engineName} pipeline cannot move while it is`);
    }
  };

  // A hung generation says that the pipeline is stuck, not where: any member may hold it up. One seen
  // stopped is named (the first in pipeline order, the others after it); else one on a node that did
  // not answer the look and has missed its liveness probes too (a frozen machine: its members could
  // not be seen, stopped or not; one slow `ps` alone is no such sign); otherwise the server it was
  // seen through is, with word that the engine does not say which member hangs.
  const judgeHang = async (server: WatchedProcess, took: string, counted: boolean): Promise<void> => {
    const {
      stopped: [first, ...others],
      answered,
    } = await lookForStoppedMembers(cluster, options.nodeFor, timeoutMs);
    if (done || controller.signal.aborted) return;
    if (first !== undefined) return die(first.process, "GenerationHung", [`stopped (${describeStopped(first)}) while ${took}`, ...others.map(alsoStopped)].join("; "));
    // An engine that answers a completion only once it has generated it, and whose /health gave
    // no count of its tokens, cannot tell a hang from a wait for a free slot: the probe's deadline
    // is the definition's, and it says so.
    const orBusy =
      watchdog?.headMeansTaken === false && !counted
        ? ", or every slot stayed busy that long ([engine] generation_watchdog_seconds must exceed the longest a request waits for a free slot),"
        : "";
    const unseen = cluster.processes.filter((p) => !answered.has(p.node));
    const silent = unseen.filter((p) => (unanswered.get(p.node) ?? 0) > 0);
    if (silent.length > 0) {
      const [blamed, ...rest] = silent;
      const also = rest.length === 0 ? "" : ` (nor could ${rest.map((p) => `${labelOf(p)} on ${p.node}`).join(", ")})`;
      return die(
        blamed!,
        "GenerationHung",
        `${took}; the pipeline hangs${orBusy} and its node, which misses its liveness probes, did not answer a look at its processes${also}: a member there may hold it (stopped, or its machine frozen or cut off); none was seen stopped where the nodes answered`,
      );
    }
    const unlooked = [...new Set(unseen.map((p) => p.node))];
    const notLooked = unlooked.length === 0 ? "" : `; ${unlooked.join(", ")} could not be looked at`;
    return die(server, "GenerationHung", `${took}; the pipeline hangs${orBusy} and ${engineName} does not say which member holds it (none was seen stopped${notLooked})`);
  };

  // A pipeline that hangs while its /health answers 200 (mlx-lm's ring): one token, in time, or dead.
  const watchdog = generationWatchdogOf(cluster, readiness, options.generationWatchdog);
  // In such an engine a stopped member is otherwise found by the watchdog alone (up to its interval
  // plus its deadline, 30 s): per node, a member seen stopped `strikes` probes in a row is a death.
  // Engines whose /health sees the hang (shard-engine's heartbeats) are left to it.
  if (watchdog !== undefined) for (const name of memberNodes) loop(() => checkStopped(name));
  if (server !== undefined && url !== undefined && watchdog !== undefined) {
    // An engine that logs the steps of the prompt it processes (taking no request in meanwhile).
    const logFile = server.logFile;
    const prompts =
      readiness.promptStepIn === undefined || logFile === undefined
        ? undefined
        : new PromptProgress(() => readTail(options.nodeFor(server.node), logFile, allLogLines, timeoutMs), readiness.promptStepIn, watchdog.timeoutMs);
    let failedAnswers = 0;
    track(
      (async () => {
        while (!controller.signal.aborted && !done) {
          await sleep(watchdog.intervalMs, controller.signal);
          if (controller.signal.aborted || done) return;
          const before = await probeProgress(url, readiness, controller.signal);
          await prompts?.mark();
          const askedAt = performance.now();
          const answer = await probeGeneration(url, readiness, watchdog, controller.signal, cluster.model);
          if (done || controller.signal.aborted) return;
          // An engine that answers every completion with a server error, or with something that is
          // no completion, serves nothing while its /health may say 200: 2 such answers in a row are a death.
          if (typeof answer === "object") {
            failedAnswers++;
            if (failedAnswers >= failedAnswersToDie) {
              return die(
                server,
                "GenerationFailed",
                `a one-token completion through ${url} ${answer.failed} (${failedAnswers} probes in a row): the engine takes requests and does not generate`,
              );
            }
            continue;
          }
          failedAnswers = 0;
          // Refused as busy (429, its queue full): an engine that counts its tokens is judged as a
          // completion that waited out the deadline would be — a queue kept full while the pipeline
          // hangs must not hide the hang; one that does not count them cannot be judged.
          if (answer === "busy") {
            if (before === undefined) continue;
            await sleep(Math.max(0, watchdog.timeoutMs - (performance.now() - askedAt)), controller.signal);
            if (done || controller.signal.aborted) return;
            const after = await probeProgress(url, readiness, controller.signal);
            if (done || controller.signal.aborted || after === undefined || after > before) continue;
            await judgeHang(
              server,
              `a one-token completion through ${url} was refused as busy (429) and the pipeline generated nothing in ${watchdog.timeoutMs} ms (${after} tokens since it started)`,
              true,
            );
            continue;
          }
          // "taken": the engine has the request and every slot is busy; the next probe judges again.
          if (answer !== "timeout") continue;
          // No answer while the daemon reaches none of the cluster's nodes, nor its coordinator, says nothing of the pipeline.
          if (healthSilent && blindedByCutOff()) continue;
          // A long prompt that keeps moving holds every new request back: busy, not hung.
          if (prompts !== undefined && (await prompts.moving())) continue;
          if (done || controller.signal.aborted) return;
          // An engine that counts its tokens: one that generated for others meanwhile is busy, not hung.
          const after = before === undefined ? undefined : await probeProgress(url, readiness, controller.signal);
          if (done || controller.signal.aborted) return;
          if (before !== undefined && after !== undefined && after > before) continue;
          const still = after === undefined ? "" : ` and generated nothing meanwhile (${after} tokens since it started)`;
          await judgeHang(server, `a one-token completion through ${url} took over ${watchdog.timeoutMs} ms${still}`, still !== "");
        }
      })(),
    );
  }

  return {
    stop: async () => {
      done = true;
      controller.abort();
      while (pending.size > 0) await Promise.allSettled([...pending]);
    },
    unobservable: () => unobservable,
    judging: () => gone.size > 0 && !done,
  };
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const timer = setTimeout(done, ms);
    function done(): void {
      clearTimeout(timer);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}

/**
 * The generation watchdog a cluster runs under: the monitor's own timings (tests), else the
 * definition's `[engine] generation_watchdog_seconds` (0: none; otherwise probes every half of it),
 * else the engine's. Whether a streamed head means the request was taken is the engine's fact.
 */
function generationWatchdogOf(
  cluster: Pick<WatchedCluster, "generationWatchdogSeconds">,
  readiness: EngineReadiness,
  timings: { intervalMs: number; timeoutMs: number } | undefined,
): GenerationWatchdog | undefined {
  const headMeansTaken = readiness.generationWatchdog?.headMeansTaken ?? false;
  if (timings !== undefined) return { headMeansTaken, ...timings };
  const seconds = cluster.generationWatchdogSeconds;
  if (seconds === undefined) return readiness.generationWatchdog;
  if (seconds === 0) return undefined;
  return { headMeansTaken, timeoutMs: seconds * 1000, intervalMs: seconds * 500 };
}
