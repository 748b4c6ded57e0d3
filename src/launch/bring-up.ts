/**
 * Ordered, all-or-nothing launch:
 *   ports → engine config and token on every node → stages wave by wave in the engine's start order
 *   (each recorded in the ledger before anything waits on it; each wave up before the next starts) →
 *   the coordinator, for engines that have one → the HTTP server's health endpoint → one-token
 *   readiness probe → router registration. What "up", "healthy" and "ready" mean is the engine's
 *   (`driver.facts.readiness`): a transport port that accepts connections, probed from the
 *   coordinator's node, or a ring's log line (a ring port is never probed).
 * Any failure tears down everything already started, in reverse order, and throws a LaunchError
 * naming the step. Every step is a timestamped timeline event. A launch called off (`context.signal`)
 * stops between two steps or within a wait, is torn down the same way, and throws the signal's reason.
 */
import type { EngineTopology, ProcessFiles } from "../engines/index.js";
import type { LedgerEntry, LedgerProcess } from "./ledger.js";
import { LaunchError } from "./launch-error.js";
import { oneAllocationAtATime } from "./ports.js";
import { describeRecordedExit, plannedProcess, processLabel, readLogTail, startEngineProcess } from "./processes.js";
import { routerBackendOf } from "./router-backend.js";
import { teardownCluster } from "./teardown.js";
import { defaultLogLimits, keepLogsBounded } from "./log-keeper.js";
import type { LaunchContext, LaunchRequest, LaunchResult, TimelineEvent } from "./types.js";
import { watchStopped } from "./stopped-watch.js";
import { joinHostPort, type NodeAccess } from "../nodes/index.js";
import { isShardctlError, messageOf } from "../errors/index.js";
import { claimRunFolders } from "./run-claim.js";
import { allocateTopology } from "./allocate-topology.js";
import { writeLaunchFiles } from "./launch-files.js";
import { runFoldersFull, runFoldersOf, stopLeftovers } from "./run-folders.js";
import { awaitFirstToken, listeningWider, waitHealthy, waitListening, waitRingLine, type LaunchInFlight } from "./launch-waits.js";
import { asLaunchError, boundAddressesOf, exitError, hostForUrl, portHeldBy, type PortHeld } from "./launch-failures.js";

export async function launchCluster(request: LaunchRequest, context: LaunchContext): Promise<LaunchResult> {
  const timeline: TimelineEvent[] = [];
  const event = (step: string, detail?: string): void => {
    const e: TimelineEvent = { at: new Date().toISOString(), step, ...(detail === undefined ? {} : { detail }) };
    timeline.push(e);
    context.onEvent?.(e);
  };
  const entry: LedgerEntry = {
    cluster: request.cluster,
    revision: request.revision,
    ...(request.identity === undefined ? {} : { identity: request.identity }),
    ...(request.definitionDigest === undefined ? {} : { definitionDigest: request.definitionDigest }),
    ...(request.owner === undefined ? {} : { owner: request.owner }),
    engine: request.driver.facts.kind,
    model: request.modelName,
    ...(request.generationWatchdogSeconds === undefined ? {} : { generationWatchdogSeconds: request.generationWatchdogSeconds }),
    ...(request.healthSilenceSeconds === undefined ? {} : { healthSilenceSeconds: request.healthSilenceSeconds }),
    ...(request.memoryBytes === undefined ? {} : { memoryBytes: request.memoryBytes }),
    ...(request.modelCommit === undefined ? {} : { modelCommit: request.modelCommit }),
    phase: "launching",
    startedAt: new Date().toISOString(),
    processes: [],
    ports: [],
  };
  const nodes = nodesOf(request);
  // Every wait below also looks for a started process that is stopped, and says so at once.
  const stopped = watchStopped(entry, (name) => nodes.get(name)!, event);
  // Recorded before anything starts: a daemon killed from here on leaves a "launching" entry, which
  // its successor tears down (and, once it holds a process, refunds to the restart budget).
  await context.ledger.write(entry);
  event("launch-started", `revision ${request.revision.slice(0, 12)}`);
  const signal = context.signal;
  // Between two steps: a launch called off starts nothing more.
  const goOn = (): void => signal?.throwIfAborted();
  let logs: { stop(): Promise<void> } | undefined;

  try {
    if (request.claimant !== undefined) await claimRunFolders(runFoldersOf(request), request.claimant, event);
    await stopLeftovers(request, event);
    goOn();
    // Allocate transport ports and the coordinator's control port, and record them before another
    // launch of this process chooses its own (the ports other launches hold are read from the ledger).
    const url = `http://${hostForUrl(request.coordinator.urlHost ?? request.coordinator.bindHost)}:${request.coordinator.httpPort}`;
    const topology = await oneAllocationAtATime(async () => {
      const allocated = await allocateTopology(request, context, entry);
      entry.coordinatorUrl = url;
      await context.ledger.write(entry);
      return allocated;
    });
    event("ports-allocated", topology.stages.map((s) => `${s.id}=${s.address.port}`).join(" "));
    goOn();
    const portHeld = portHeldBy(request, topology, nodes, entry);
    const inFlight: LaunchInFlight = { entry, nodes, portHeld, binds: (process) => boundAddressesOf(process, request, topology) };

    // Write the engine config and the per-launch token on every node.
    const files = await writeLaunchFiles(request, topology);
    event("launch-files-written");
    goOn();
    // The engines' logs are kept bounded from their first line: a model may load for many minutes.
    logs = keepLogsBounded(entry, (name) => nodes.get(name)!, defaultLogLimits, context.onLogTrimmed);

    // Start the stages wave by wave, recording each before waiting on anything.
    goOn();
    await context.beforeFirstStart?.();
    const readiness = request.driver.facts.readiness;
    const stages: LedgerProcess[] = [];
    for (const wave of request.driver.startOrder(topology)) {
      for (const i of wave) {
        const stage = request.stages[i]!;
        const slot = topology.stages[i]!;
        const argv = request.driver.stageArgv(topology, slot, files.get(stage.runDir)!);
        goOn();
        const process = await recordAndStart(entry, context, stage.node, plannedProcess("stage", stage.index, stage.nodeName, stage.runDir), argv, portHeld);
        stages[i] = process;
        event(`stage-${stage.index}-started`, `pid ${process.pid} on ${stage.nodeName}, layers [${slot.layers[0]}, ${slot.layers[1]})${rankNote(request, stage.index)}`);
      }
      for (const i of wave) {
        const stage = request.stages[i]!;
        const slot = topology.stages[i]!;
        const wait = { deadlineMs: request.deadlines.stageListenMs, signal };
        if (readiness.stageUp === "transport-listening") {
          await waitListening(
            stage.node,
            stages[i]!,
            request.coordinator.node,
            slot.address,
            wait,
            stopped,
            inFlight,
            (detail) => event(`stage-${stage.index}-silent`, detail),
            (detail) => event(`stage-${stage.index}-reached`, detail),
          );
        } else {
          await waitRingLine(stage.node, stages[i]!, ringReadyLine(request, stage.index), wait, stopped, inFlight);
        }
        event(`stage-${stage.index}-listening`, joinHostPort(slot.address.host, slot.address.port));
      }
    }

    // The HTTP server: the coordinator, started now, or the stage of the last layers.
    goOn();
    const server = readiness.httpServer === "coordinator" ? await startCoordinator(request, topology, files, entry, context, portHeld, event) : stages.at(-1)!;
    const serverNode = readiness.httpServer === "coordinator" ? request.coordinator.node : request.stages.at(-1)!.node;

    // Wait for its health endpoint.
    await waitHealthy(serverNode, server, url, readiness, { deadlineMs: request.deadlines.coordinatorHealthMs, signal }, stopped, inFlight, (said) =>
      event("coordinator-answered", said),
    );
    event("coordinator-healthy", url);

    // Generate one token through the whole pipeline.
    try {
      await awaitFirstToken(
        url,
        readiness,
        request.driver.facts.servedModelName ?? request.modelName,
        { deadlineMs: request.deadlines.readinessMs, signal },
        inFlight,
        { node: serverNode, process: server },
        stopped,
      );
    } finally {
      stopped.close();
    }
    event("readiness-probe-passed");
    goOn();
    for (const wider of await listeningWider(inFlight)) event("listening-wider", wider);
    for (const full of await runFoldersFull(request)) event("run-folder-full", full);

    // Register with the router.
    if (request.router !== undefined) {
      const backend = routerBackendOf(request.router, url, request.modelName, request.driver.facts);
      // Recorded before it is made: a daemon killed right after registering still deregisters it
      // (deregistering an entry that never made it into the router is harmless).
      entry.routerBackend = backend.name;
      await context.ledger.write(entry);
      try {
        await context.registrar.register(backend);
      } catch (error) {
        // The router may have applied it anyway (an admin API that timed out after the add): take it
        // back once, best effort. A router that cannot be written at all must not keep the ledger
        // entry alive for ever, so the backend is forgotten either way.
        await context.registrar.deregister(backend.name).catch(() => undefined);
        delete entry.routerBackend;
        const reason = isShardctlError(error) && error.reason === "RouterConfigUnwritable" ? error.reason : "RouterRegistrationFailed";
        throw new LaunchError(reason, "router-registration", `could not register backend "${backend.name}" with the router: ${messageOf(error)}`, {
          cause: error,
        });
      }
      event("router-registered", backend.name);
    }

    entry.phase = "running";
    await context.ledger.write(entry);
    // The supervision keeps the logs bounded from here.
    await logs.stop();
    event("ready", url);
    return { coordinatorUrl: url, timeline };
  } catch (error) {
    stopped.close();
    // Not a byte of a log is emptied while the failure's evidence is read from it.
    await logs?.stop();
    // Called off: whatever was thrown on the way out (a wait ended, a probe cut), the caller hears
    // its own reason, and nothing is read from the stages' logs.
    const calledOff = signal?.aborted === true;
    const failure: unknown = calledOff ? signal.reason : await causeInStageLogs(request, nodes, entry, asLaunchError(error));
    if (calledOff) event("launch-called-off", `${messageOf(failure)}; everything started is torn down`);
    else if (failure instanceof LaunchError) event("launch-failed", `${failure.reason} at ${failure.step}: ${failure.message}`);
    try {
      await teardownCluster(entry, {
        ledger: context.ledger,
        registrar: context.registrar,
        nodeFor: (name) => nodes.get(name)!,
        graceMs: request.deadlines.stopGraceMs,
        ...(request.claimant === undefined ? {} : { claimant: request.claimant }),
        onEvent: (e) => {
          timeline.push(e);
          context.onEvent?.(e);
        },
      });
    } catch (teardownError) {
      // What could not be stopped stays in the ledger for the next pass; the launch failure is
      // still what the caller must hear about.
      event("teardown-incomplete", messageOf(teardownError));
    }
    throw failure;
  }
}

/**
 * A launch that failed once its stages listened may have failed because one of them could not reach
 * the next: the pipeline never forms, and what notices is a later step (the coordinator exits,
 * /health never answers, the first token does not come). When a stage's log says so (an engine
 * that says), that is the failure: named by its link, with the step's own words after it; so is a
 * stage that heard nothing from a neighbour that others heard (a link that passes only small
 * packets). Both are given back to the restart budget as link faults. The stage
 * logs are read only for those steps' failures, each read bounded (2 s, all at once): a launch
 * that failed on a silent node is not held up asking it.
 */
async function causeInStageLogs(request: LaunchRequest, nodes: Map<string, NodeAccess>, entry: LedgerEntry, failure: LaunchError): Promise<LaunchError> {
  const unreachableIn = request.driver.facts.nextStageUnreachableIn;
  const stages = entry.processes.filter((p) => p.role === "stage" && p.pid > 0);
  // Every failure of the waits for /health and for the first token (CoordinatorExited, a timeout, or
  // a stage that exited meanwhile: which of a stage and the coordinator is seen gone first, when the
  // pipeline cannot form, is a matter of timing).
  const afterListening =
    failure.reason === "CoordinatorExited" ||
    failure.reason === "CoordinatorHealthTimeout" ||
    failure.step === "readiness-probe" ||
    failure.step === "coordinator-health";
  if (unreachableIn === undefined || stages.length === 0 || !afterListening) return failure;
  const tails = await Promise.all(stages.map(async (p) => ({ p, tail: await readLogTail(nodes.get(p.node)!, p) })));
  for (const { p, tail } of tails) {
    const found = unreachableIn(tail);
    if (found === undefined) continue;
    const label = processLabel(p.role, p.index);
    // The last stage's next hop is the coordinator's control address, where its results go.
    const next = found.peer === "coordinator" ? "the coordinator's control address," : "the next stage,";
    return new LaunchError(
      "StageLinkUnreachable",
      failure.step,
      `${label} on ${p.node} could not reach ${next} ${found.peer} at ${found.address} (${found.error}): the link between their nodes is down or blocked; ${failure.message}`,
      { logTail: tail, cause: failure },
    );
  }
  // A stage that connected to its neighbour, then heard nothing from it (not even its heartbeats)
  // while another member still heard that neighbour: the link between the two carried the
  // handshake's small frames and lost the first large ones (the warm-up's activations). A path-MTU
  // black hole (a tunnel, VPN or switch with a smaller MTU, ICMP "fragmentation needed" filtered)
  // does exactly that; so does a firewall that drops one direction only.
  const { silentPeerIn, answeringPeersIn, lostPeerIn } = request.driver.facts;
  if (silentPeerIn === undefined) return failure;
  const others = entry.processes.filter((p) => p.role !== "stage" && p.pid > 0 && nodes.has(p.node));
  const otherTails = await Promise.all(others.map((p) => readLogTail(nodes.get(p.node)!, p)));
  const heard = new Set([...tails.map(({ tail }) => tail), ...otherTails, failure.logTail].flatMap((tail) => answeringPeersIn?.(tail) ?? []));
  for (const { p, tail } of tails) {
    const said = silentPeerIn(tail);
    if (said === undefined) continue;
    const label = processLabel(p.role, p.index);
    // The silent peer was not silent to everyone: another member heard it, or it heard this stage
    // itself (its own words: the reporter answering, or its link to the reporter closed under it).
    const peerTail = tails.find(({ p: q }) => processLabel(q.role, q.index) === said.peer)?.tail ?? [];
    const peerHeardReporter = (answeringPeersIn?.(peerTail) ?? []).includes(label) || lostPeerIn?.(peerTail)?.peer === label;
    if (!heard.has(said.peer) && !peerHeardReporter) continue;
    const peer = entry.processes.find((q) => processLabel(q.role, q.index) === said.peer);
    const where = peer === undefined ? said.peer : `${said.peer} on ${peer.node}`;
    return new LaunchError(
      "StageLinkUnreachable",
      failure.step,
      `${label} on ${p.node} connected to ${where}, then heard nothing from it for ${said.silentMs} ms while another member still heard it: ` +
        `the link between their nodes passes small packets (the handshake, heartbeats) but lost the first large frames. ` +
        `A path-MTU black hole (a tunnel, VPN or switch with a smaller MTU, ICMP "fragmentation needed" filtered) does this: ` +
        `between ${p.node} and ${peer?.node ?? said.peer}, \`ping -M do -s 1472 <address>\` (macOS: \`ping -D -s 1472\`) then fails while a plain ping passes; ${failure.message}`,
      { logTail: tail, cause: failure },
    );
  }
  return failure;
}

/** Start the coordinator process (engines whose `readiness.httpServer` is "coordinator"). */
async function startCoordinator(
  request: LaunchRequest,
  topology: EngineTopology,
  files: Map<string, ProcessFiles>,
  entry: LedgerEntry,
  context: LaunchContext,
  portHeld: PortHeld,
  event: (step: string, detail?: string) => void,
): Promise<LedgerProcess> {
  const coordinator = request.coordinator;
  const argv = request.driver.coordinatorArgv(topology, files.get(coordinator.runDir)!);
  const process = await recordAndStart(
    entry,
    context,
    coordinator.node,
    plannedProcess("coordinator", undefined, coordinator.nodeName, coordinator.runDir),
    argv,
    portHeld,
  );
  event("coordinator-started", `pid ${process.pid} on ${coordinator.nodeName}`);
  return process;
}

/** ", rank r" for engines that number their stages otherwise than in layer order. */
function rankNote(request: LaunchRequest, stage: number): string {
  const rankOf = request.driver.facts.rankOfStage;
  return rankOf === undefined ? "" : `, rank ${rankOf(stage, request.stages.length)}`;
}

/** The log line a ring stage prints once it is up, as a regular expression. */
function ringReadyLine(request: LaunchRequest, stage: number): RegExp {
  const facts = request.driver.facts;
  const ringLog = facts.readiness.ringLog;
  if (ringLog === undefined) throw new Error(`${facts.name} waits for a ring log line but names none`);
  return new RegExp(ringLog.ready(facts.rankOfStage?.(stage, request.stages.length) ?? stage));
}

/** The processes' nodes by name, for teardown. */
function nodesOf(request: LaunchRequest): Map<string, NodeAccess> {
  const nodes = new Map<string, NodeAccess>();
  for (const stage of request.stages) nodes.set(stage.nodeName, stage.node);
  nodes.set(request.coordinator.nodeName, request.coordinator.node);
  return nodes;
}

/**
 * Record a process in the ledger (pid 0: planned), start it, and record its pid and start time.
 * A process that ends before its start time could even be read is reported the same way as one
 * that ends later (StageExited / CoordinatorExited, with its log), not as a generic start failure:
 * which of the two happens is only a matter of timing.
 */
async function recordAndStart(
  entry: LedgerEntry,
  context: LaunchContext,
  node: NodeAccess,
  planned: LedgerProcess,
  argv: string[],
  portHeld: PortHeld = () => Promise.resolve(undefined),
): Promise<LedgerProcess> {
  entry.processes.push(planned);
  await context.ledger.write(entry);
  let process: LedgerProcess;
  try {
    process = await startEngineProcess(node, planned, argv);
  } catch (error) {
    const label = processLabel(planned.role, planned.index);
    const step = planned.role === "stage" ? `${label}-start` : "coordinator-start";
    // The node fell silent while the process was being started: it may run, its pid unknown. The
    // ledger's planned record (pid 0) lets the teardown find it by its exit-status file and stop it.
    if (isShardctlError(error, "NodeUnreachable")) {
      throw new LaunchError(
        "NodeUnreachable",
        step,
        `${label} on ${planned.node} could not be started: ${error.message}; whether it runs is unknown: it is looked for and stopped before anything is launched there again`,
        { cause: error },
      );
    }
    if (!isShardctlError(error, "ProcessStartFailed")) throw error;
    // Said as any exit is (an engine that put itself in the background exits 0 at once).
    const how = (await describeRecordedExit(node, planned)) ?? "exited";
    const logTail = await readLogTail(node, planned);
    throw await exitError(planned, `${label} on ${planned.node} ${how} as soon as it started`, step, logTail, portHeld, error);
  }
  entry.processes[entry.processes.indexOf(planned)] = process;
  await context.ledger.write(entry);
  return process;
}
