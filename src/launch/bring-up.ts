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
import { randomBytes } from "node:crypto";
import { join } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import type { Endpoint, EngineReadiness, EngineTopology, ProcessFiles } from "../engines/index.js";
import type { LedgerEntry, LedgerProcess } from "./ledger.js";
import { LaunchError } from "./launch-error.js";
import { allocatePorts, oneAllocationAtATime } from "./ports.js";
import {
  addressesListenedByProcess,
  defaultReachMs,
  describeEnd,
  describeRecordedExit,
  isProcessAlive,
  plannedProcess,
  processLabel,
  readLogTail,
  startEngineProcess,
} from "./processes.js";
import { routerBackendOf } from "./router-backend.js";
import { teardownCluster } from "./teardown.js";
import { defaultLogLimits, keepLogsBounded } from "./log-keeper.js";
import { askCoordinatorHealth, probeOneToken } from "./coordinator-probes.js";
import type { LaunchContext, LaunchRequest, LaunchResult, TimelineEvent } from "./types.js";
import { watchStopped, type StoppedWatch } from "./stopped-watch.js";
import { waitUntil } from "./wait-until.js";
import { askPortListener, boundSockets, freeKiB, isEveryInterface, socketCovers, within, type NodeAccess, type PortAnswer, type TcpSocket } from "../nodes/index.js";
import { isShardctlError, messageOf, ShardctlError } from "../errors/index.js";
import { clipCommand, stopLeftoverListeners } from "./leftover-listeners.js";
import { claimRunFolders, type RunFolder } from "./run-claim.js";

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
    const url = `http://${hostForUrl(request.coordinator.bindHost)}:${request.coordinator.httpPort}`;
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
        event(`stage-${stage.index}-listening`, `${slot.address.host}:${slot.address.port}`);
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
 * that says), that is the failure: named by its link, with the step's own words after it. The stage
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
 * What an earlier launch of this cluster left listening on its nodes (see leftover-listeners.ts) is
 * stopped before this launch chooses ports: it would hold them and answer in place of this one.
 */
async function stopLeftovers(request: LaunchRequest, say: (step: string, detail: string) => void): Promise<void> {
  const byNode = new Map<string, RunFolder[]>();
  for (const folder of runFoldersOf(request)) byNode.set(folder.nodeName, [...(byNode.get(folder.nodeName) ?? []), folder]);
  await Promise.all(
    [...byNode].map(([nodeName, folders]) =>
      stopLeftoverListeners(
        folders[0]!.node,
        nodeName,
        folders.map((f) => f.runDir),
        request.deadlines.stopGraceMs,
        say,
      ),
    ),
  );
}

/**
 * Room below which a run folder's file system counts as full, KiB (1 MiB): an engine's log, and the
 * exit status its wrapper writes when it ends, no longer fit.
 */
const fullRunFolderKiB = 1024;

/**
 * The run folders of the launch whose file system is full, said once it serves: the launch files
 * fitted, but an engine's log and its exit status may not, so a death there would be reported
 * without how it ended or what it said. Said, not refused: it serves. One question to each node,
 * bounded (2 s); a node that does not say is passed over.
 */
async function runFoldersFull(request: LaunchRequest): Promise<string[]> {
  const said = await Promise.all(
    runFoldersOf(request).map(async (folder) => {
      const free = await within(
        2_000,
        freeKiB(folder.node, folder.runDir).catch(() => undefined),
        undefined,
      );
      return free === undefined || free >= fullRunFolderKiB
        ? []
        : [
            `the file system holding ${folder.runDir} on ${folder.nodeName} has ${free} KiB free: the engines' logs there no longer grow, and a death there would be reported without its exit status or its last words; free space there`,
          ];
    }),
  );
  return said.flat();
}

/** The launch's run folders, each once. */
function runFoldersOf(request: LaunchRequest): RunFolder[] {
  const folders = new Map<string, RunFolder>();
  for (const target of [...request.stages, request.coordinator])
    folders.set(`${target.nodeName}\0${target.runDir}`, { node: target.node, nodeName: target.nodeName, runDir: target.runDir });
  return [...folders.values()];
}

async function allocateTopology(request: LaunchRequest, context: LaunchContext, entry: LedgerEntry): Promise<EngineTopology> {
  const coordinator = request.coordinator;
  // The HTTP port is the definition's own: refuse it when taken rather than picking another, naming
  // what holds it where the node says.
  if (await coordinator.node.isPortOpen(coordinator.bindHost, coordinator.httpPort, 1_000)) {
    const { listener: holder, unanswered } = await askPortListener(coordinator.node, coordinator.httpPort);
    const by =
      holder !== undefined
        ? ` by pid ${holder.pid} (${clipCommand(holder.command)})`
        : unanswered !== undefined
          ? ` (what holds it could not be asked: ${unanswered})`
          : "";
    throw new LaunchError(
      "PortInUse",
      "ports",
      `the coordinator's HTTP port ${coordinator.bindHost}:${coordinator.httpPort} is already in use on ${coordinator.nodeName}${by}; choose another [coordinator] port or stop what holds it`,
    );
  }
  // A coordinator process needs a control port; an engine whose last stage serves HTTP has none.
  const hasCoordinator = request.driver.facts.readiness.httpServer === "coordinator";
  const requests = [
    ...request.stages.map((s) => ({ label: `stage-${s.index} on ${s.nodeName}`, host: s.bindHost, node: s.node })),
    // The control port is bound on the control host, so it is probed and held there.
    ...(hasCoordinator ? [{ label: `coordinator on ${coordinator.nodeName}`, host: coordinator.controlHost, node: coordinator.node }] : []),
  ];
  // Another cluster launching at the same moment may have taken the HTTP port since this launch
  // looked (nothing listens on it until its coordinator starts): its record says so, and the
  // probes of this launch would otherwise be answered by that cluster's coordinator.
  const taken = await context.httpPortHolder?.(coordinator.nodeName, coordinator.bindHost, coordinator.httpPort);
  if (taken !== undefined) {
    throw new LaunchError(
      "PortInUse",
      "ports",
      `the coordinator's HTTP port ${coordinator.bindHost}:${coordinator.httpPort} on ${coordinator.nodeName} is held by cluster "${taken}", launched beside this one: give one of the two definitions another [coordinator] port`,
    );
  }
  const held = await context.heldPorts();
  held.push({ host: coordinator.bindHost, port: coordinator.httpPort, holder: `this cluster's HTTP listener` });
  // A port is taken when a socket on its node holds it, in any state: a listener, but also an
  // outgoing connection whose local port the kernel picked there (the range may lie in the
  // ephemeral one: the daemon's own SSH connection to a node once held a coordinator's control port,
  // which a connection never finds, and every launch failed on it). The nodes' socket tables are
  // read once per node. A ring's listener takes the first connection it accepts as its neighbour,
  // so for a ring the table is the only look (a connection would break another ring waiting there).
  const readiness = request.driver.facts.readiness;
  const tables = new Map<NodeAccess, Promise<TcpSocket[] | undefined>>();
  const heldInTable = async (node: NodeAccess, host: string, port: number): Promise<boolean | undefined> => {
    let table = tables.get(node);
    if (table === undefined) tables.set(node, (table = boundSockets(node, { deadlineMs: defaultReachMs })));
    return (await table)?.some((s) => s.port === port && socketCovers(s, host));
  };
  const isTaken = async (node: NodeAccess, host: string, port: number): Promise<boolean> => {
    const inTable = await heldInTable(node, host, port);
    if (inTable === true) return true;
    if (readiness.stageUp !== "ring-log-line") return node.isPortOpen(host, port, 500);
    if (inTable === undefined) {
      throw new ShardctlError(
        "NodeCommandFailed",
        `node ${node.config.name}: cannot list its TCP sockets (with ss, lsof or netstat), by which a ring's ports are chosen without connecting to them: install one of them there`,
      );
    }
    return false;
  };
  let ports: number[];
  try {
    ports = await allocatePorts(request.portRange, requests, held, (host, port) => isTaken(requests.find((r) => r.host === host)!.node, host, port));
  } catch (error) {
    throw asLaunchError(error, "ports");
  }
  entry.ports = [
    ...request.stages.map((s, i) => ({ node: s.nodeName, host: s.bindHost, port: ports[i]!, purpose: "transport" as const })),
    ...(hasCoordinator ? [{ node: coordinator.nodeName, host: coordinator.controlHost, port: ports[request.stages.length]!, purpose: "control" as const }] : []),
    { node: coordinator.nodeName, host: coordinator.bindHost, port: coordinator.httpPort, purpose: "http" as const },
  ];
  return {
    cluster: request.cluster,
    modelName: request.modelName,
    maxSequences: request.maxSequences,
    ...(request.contextLength === undefined ? {} : { contextLength: request.contextLength }),
    transport: request.transport,
    explicitLayers: request.explicitLayers,
    stages: request.stages.map((s, i) => ({
      index: s.index,
      id: `stage-${s.index}`,
      address: { host: s.bindHost, port: ports[i]! },
      layers: s.layers,
      ...(s.threads === undefined ? {} : { threads: s.threads }),
    })),
    coordinator: {
      id: "coordinator",
      // The stages dial this address back (the HTTP host may be loopback or a wildcard). Without a
      // coordinator process it is never used: the HTTP one stands in.
      address: hasCoordinator ? { host: coordinator.controlHost, port: ports[request.stages.length]! } : { host: coordinator.bindHost, port: coordinator.httpPort },
      http: { host: coordinator.bindHost, port: coordinator.httpPort },
      // It holds no layers: one thread, whatever runs beside it.
      threads: 1,
    },
  };
}

/** The most of a previous launch's log kept beside the next one's (`<label>.log.previous`), bytes: 1 MiB. */
const previousLogBytes = 1 << 20;

/**
 * $1 = a log. Its last previousLogBytes go to `$1.previous` (written whole, then renamed: a full
 * disk leaves the last one kept), and the log is removed.
 */
const keepPreviousLogScript = `[ -f "$1" ] || exit 0
tail -c ${previousLogBytes} "$1" > "$1.previous.tmp" 2>/dev/null && mv -f "$1.previous.tmp" "$1.previous" || rm -f "$1.previous.tmp"
rm -f "$1"`;

/** Remove a previous launch's log, its end kept as `<log>.previous`; a node that does not answer has it removed by the process's own start. */
async function keepPreviousLog(node: NodeAccess, logFile: string): Promise<void> {
  const result = await node.run(["sh", "-c", keepPreviousLogScript, "sh", logFile], { deadlineMs: 5_000 });
  if (result.exitCode !== 0) await node.remove(logFile);
}

/** The engine config (and the token, when the engine authenticates) in each process's run directory. */
async function writeLaunchFiles(request: LaunchRequest, topology: EngineTopology): Promise<Map<string, ProcessFiles>> {
  const config = request.driver.renderClusterConfig(topology);
  // One token per launch; it is written only to 0600 files on the nodes, never logged or recorded.
  const token = request.driver.facts.authenticatesTransport ? randomBytes(32).toString("hex") : undefined;
  const targets = [...request.stages, request.coordinator];
  const files = new Map<string, ProcessFiles>();
  // The node being written, for the message of a write that fails.
  let writing: (typeof targets)[number] | undefined;
  try {
    // The last launch's logs go first: an engine that filled its disk with its log would otherwise
    // leave no room for the files of the next launch. Their last MiB is kept beside them (see
    // keepPreviousLog), where the disk has room for it: what a member that died said is not erased.
    await Promise.all(
      targets.map((target) =>
        keepPreviousLog(
          target.node,
          ("index" in target
            ? plannedProcess("stage", target.index, target.nodeName, target.runDir)
            : plannedProcess("coordinator", undefined, target.nodeName, target.runDir)
          ).logFile,
        ),
      ),
    );
    for (const target of targets) {
      writing = target;
      const paths: ProcessFiles = {
        modelDir: target.modelDir,
        clusterConfig: join(target.runDir, request.driver.clusterConfigName),
        tokenFile: join(target.runDir, "transport.token"),
        cacheDir: join(target.runDir, "cache"),
      };
      if (!files.has(target.runDir)) {
        await target.node.mkdir(paths.cacheDir);
        await target.node.writeFile(paths.clusterConfig, config);
        if (token !== undefined) await target.node.writeFile(paths.tokenFile, token + "\n", { mode: 0o600 });
      }
      files.set(target.runDir, paths);
    }
  } catch (error) {
    // A node that fell silent (a partition) is no fault of the files, nor of the cluster.
    const reason = isShardctlError(error, "NodeUnreachable") ? "NodeUnreachable" : "LaunchFilesFailed";
    // A silent node's error names it already.
    const where = writing === undefined || reason === "NodeUnreachable" ? "" : ` in ${writing.runDir} on ${writing.nodeName}`;
    const free = reason === "LaunchFilesFailed" && writing !== undefined ? await within(2_000, freeKiB(writing.node, writing.runDir), undefined) : undefined;
    const full = free !== undefined && free < 1024 ? `; the file system holding it is full (${free} KiB free): free space there` : "";
    const fix =
      reason === "LaunchFilesFailed"
        ? `${full === "" ? "; that folder must be writable by the node's user" : full} (the launch is tried again meanwhile, not counted against the restart budget)`
        : "";
    throw new LaunchError(reason, "launch-files", `could not write the launch files${where}: ${messageOf(error)}${fix}`, { cause: error });
  }
  return files;
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

async function waitListening(
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
  const where = `${address.host}:${address.port}`;
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
async function waitRingLine(node: NodeAccess, process: LedgerProcess, line: RegExp, wait: Wait, stopped: StoppedWatch, launch: LaunchInFlight): Promise<void> {
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
    `${label} on ${process.node} did not ${words.notDone} within ${timing.deadlineMs} ms${liveness.silence()}${stopped.words()}${loading}`,
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
async function awaitFirstToken(
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

async function waitHealthy(
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
interface Wait {
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
  let askedAt = Date.now();
  // Asked all at once: one silent node (each question waits up to 2 s) must not slow the others' looks.
  return async () => {
    if (Date.now() - askedAt < everyMs) return undefined;
    askedAt = Date.now();
    const alive = await Promise.all(watched.map(({ liveness }) => liveness.isAliveOrUnknown()));
    return watched.find((_, i) => !alive[i])?.p;
  };
}

/** "answered 500: {…}" → "answered 500": what an answer says, without a body that may differ each time. */
function gistOf(said: string): string {
  return said.split(":")[0]!;
}

/** The launch under way, as its waits see it: its ledger entry, its nodes, and whether a stage's port is held. */

interface LaunchInFlight {
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
async function listeningWider(launch: LaunchInFlight): Promise<string[]> {
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

/**
 * A process of the launch that exited while the launch waited for `awaited`, named with how it
 * ended and its log. (A stage whose port another process held may have been seen listening: that
 * process answered the launch's probe in its place.)
 */
async function exitedWhileAwaiting(exited: LedgerProcess, launch: LaunchInFlight, step: string, awaited: string, cause?: unknown): Promise<LaunchError> {
  const node = launch.nodes.get(exited.node)!;
  const message = `${processLabel(exited.role, exited.index)} on ${exited.node} ${await describeEnd(node, exited)} while the launch waited for ${awaited}`;
  return exitError(exited, message, step, await readLogTail(node, exited), launch.portHeld, cause);
}

/**
 * Whether a socket on a process's node holds an address it binds now (undefined: not known): what
 * makes its log's "port taken" true. A stage binds its transport address; a coordinator its control
 * address and its HTTP listener. When another process of the same launch listens there (an engine
 * that opens a port of its own, which may be the next one's), its label.
 */
type PortHeld = (process: LedgerProcess) => Promise<boolean | undefined | { byLaunch: string }>;

/** PortHeld for the processes of `topology`, from their nodes' socket tables (every state: an outgoing connection holds its port too). */
function portHeldBy(request: LaunchRequest, topology: EngineTopology, nodes: Map<string, NodeAccess>, entry: LedgerEntry): PortHeld {
  return async (process) => {
    const addresses = boundAddressesOf(process, request, topology);
    if (addresses.length === 0) return undefined;
    const node = nodes.get(process.node)!;
    const covers = (sockets: TcpSocket[] | undefined): boolean | undefined =>
      sockets?.some((s) => addresses.some((address) => s.port === address.port && socketCovers(s, address.host)));
    const held = covers(await boundSockets(node, { deadlineMs: defaultReachMs }));
    if (held !== true) return held;
    for (const other of entry.processes.filter((p) => p.node === process.node && p.pid !== process.pid)) {
      if (covers(await addressesListenedByProcess(node, other)) === true) return { byLaunch: processLabel(other.role, other.index) };
    }
    return true;
  };
}

/** The addresses `process` binds: a stage's transport address, a coordinator's control and HTTP addresses. */
function boundAddressesOf(process: LedgerProcess, request: LaunchRequest, topology: EngineTopology): Endpoint[] {
  if (process.role === "coordinator") return [topology.coordinator.address, topology.coordinator.http];
  const at = request.stages.findIndex((s) => s.index === process.index);
  const address = at >= 0 ? topology.stages[at]?.address : undefined;
  return address === undefined ? [] : [address];
}

/**
 * The error of a launch process that exited (`exited`: the words so far). A process whose log says
 * its port was taken is PortInUse (given back to the budget) when a socket on its node holds an
 * address it binds now, or the node cannot say; when none does, the words are taken for the
 * engine's own failure and counted: an engine that says them for another fault would otherwise be
 * retried for ever.
 */
async function exitError(process: LedgerProcess, exited: string, step: string, logTail: string[], portHeld: PortHeld, cause?: unknown): Promise<LaunchError> {
  const reason = process.role === "stage" ? "StageExited" : "CoordinatorExited";
  const taken = portTakenIn(logTail);
  if (taken === undefined) return new LaunchError(reason, step, exited, { logTail, cause });
  const held = await portHeld(process).catch(() => undefined);
  if (held === false) {
    const note = `its log says its port was taken ("${taken}"), but no socket on ${process.node} holds it now: counted as the engine's own failure`;
    return new LaunchError(reason, step, `${exited} (${note})`, { logTail, cause });
  }
  // Taken by the launch itself: trying again would take it again, so it is the engine's failure.
  if (typeof held === "object") {
    const note = `its port was taken ("${taken}") by ${held.byLaunch} of this same launch, which listens there besides the address shardctl gave it: the engine opens a port of its own that collides with the ones shardctl hands out (the transport range and the coordinator's ports); keep the engine's own ports out of them. Counted as the engine's own failure`;
    return new LaunchError(reason, step, `${exited}: ${note}`, { logTail, cause });
  }
  return new LaunchError("PortInUse", step, `${exited}: ${portTakenAdvice(process.role === "stage" ? "transport port" : "control or HTTP port", taken)}`, {
    logTail,
    cause,
  });
}

/**
 * Liveness during a wait: a probe that fails (the node's answer got lost) counts as "still alive"
 * so the wait goes on; the phase's deadline still bounds it. Each probe is bounded as a teardown's
 * questions are (2 s): a node partitioned during the wait must not hold it past its deadline for as
 * long as its connection takes to drop. `silence()` is what a timeout's message adds when the node
 * did not answer the last probe: a stage that "did not listen" because its node went silent is told
 * apart from one that is slow.
 */
function livenessOf(node: NodeAccess, process: LedgerProcess): { isAliveOrUnknown(): Promise<boolean>; silence(): string } {
  let unanswered: { since: number; why: string } | undefined;
  return {
    async isAliveOrUnknown() {
      try {
        const alive = await isProcessAlive(node, process, { deadlineMs: defaultReachMs });
        unanswered = undefined;
        return alive;
      } catch (error) {
        unanswered ??= { since: Date.now(), why: messageOf(error) };
        return true;
      }
    },
    silence() {
      if (unanswered === undefined) return "";
      return `; node ${process.node} has not answered its liveness probes for the last ${Date.now() - unanswered.since} ms (${unanswered.why}): it may be unreachable`;
    },
  };
}

/**
 * The log tail of a process whose wait failed, unless its node stopped answering its liveness
 * probes: that read would only hold the failure up for its bound (2 s).
 */
function tailUnlessSilent(node: NodeAccess, process: LedgerProcess, liveness: { silence(): string }): Promise<string[]> {
  return liveness.silence() === "" ? readLogTail(node, process) : Promise.resolve([]);
}

function asLaunchError(error: unknown, step = "launch"): LaunchError {
  if (error instanceof LaunchError) return error;
  if (isShardctlError(error, "PortRangeExhausted")) return new LaunchError("PortRangeExhausted", step, error.message, { cause: error });
  if (isShardctlError(error, "NodeUnreachable")) return new LaunchError("NodeUnreachable", step, error.message, { cause: error });
  if (isShardctlError(error, "StateDirUnwritable")) {
    const advice =
      "the daemon records what it starts in its state directory before it starts it: free space on that disk, or make the folder writable for the daemon's user (the launch is tried again meanwhile, not counted against the restart budget)";
    return new LaunchError("StateDirUnwritable", step, `could not record the launch: ${error.message}; ${advice}`, { cause: error });
  }
  return new LaunchError("LaunchFilesFailed", step, messageOf(error), { cause: error });
}

function hostForUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/**
 * A stage's port, free when allocated, taken before it could listen. On Linux the default
 * port_range (39600-39629) lies in the ephemeral range (net.ipv4.ip_local_port_range, 32768-60999
 * by default), which the node gives to outgoing connections and to servers listening on port 0.
 */
function portTakenIn(logTail: readonly string[]): string | undefined {
  // Node.js says EADDRINUSE; Python, Go, Rust and C programs print the system's own words.
  for (const line of logTail) {
    const words = /EADDRINUSE|address already in use/i.exec(line);
    if (words !== null) return words[0];
  }
  return undefined;
}

/** `evidence`: the log's words that said the port (`port`: which) was taken. */
function portTakenAdvice(port: string, evidence: string): string {
  return `its ${port} was taken after it was found free (${evidence}). If the transport port range (the definition's [transport] port_range, or the settings' [distributed] port_range) lies in the node's ephemeral port range, reserve it there: sysctl -w net.ipv4.ip_local_reserved_ports=<the range>`;
}
