/**
 * Launch: stages in order, then the coordinator,
 * /health, one token, the router. All or nothing: a failed step has torn down what it started and
 * its evidence (reason, message, log tail) is kept for the status file. A launch called off while
 * it waits (its definition asks for another revision or is gone, or the daemon stops: see
 * call-off.ts) is torn down as well, within seconds, rather than waited out — an engine
 * loading a large model, or hung, may hold a wait for its whole deadline (minutes with
 * `[engine] load_timeout_seconds`). It failed nothing, so its count goes back to the budget.
 *
 * The launch counts against the revision's restart budget (`[daemon] restart_budget`, default 3)
 * once its first process is about to start: a launch its surroundings refuse before that (the state
 * directory's room, its router backend, its nodes' memory, a router that cannot take a
 * registration, its run folders, its ports, its launch files) started nothing, says nothing of the
 * cluster and is retried, and the status it writes meanwhile counts only the launches made. One
 * that fails later on its surroundings (a port taken as a process binds it, a link down, a node
 * that fell silent) is given back as it fails. The decision has already stalled a revision whose
 * budget is spent; the count survives a daemon restart through the status file.
 */
import { buildLaunchRequest, controlNodeName } from "../../cluster/index.js";
import { engineOf } from "../../engines/index.js";
import { messageOf, ShardctlError } from "../../errors/index.js";
import { roomLeft } from "../../files/index.js";
import { launchCluster, LaunchError, portsHeldBy } from "../../launch/index.js";
import { within } from "../../nodes/index.js";
import type { Registrar } from "../../router/index.js";
import { definitionDigest } from "../../spec/index.js";
import { launchCountOf } from "../decision-inputs.js";
import { definitionOf } from "../pass.js";
import { describeLaunchProgress, readLaunch } from "../../launch-timeline/index.js";
import type { Step } from "../run-step.js";
import { calledOff, clearRuntime, isStalled, notServingYet, recordEvent, setConditions } from "../verdicts.js";
import { heldPort } from "./claim-port.js";
import { othersInLedger, refuseTakenBackend } from "./refuse-held.js";

/**
 * Launch failures caused by the cluster's surroundings (the network, a port held by another program,
 * a transport range other clusters or programs fill, a run folder another daemon uses or another user
 * could write, a router that cannot take a registration (its config's folder unwritable, its config
 * broken, its admin API down), a state directory on a full or read-only disk), not by it.
 * (A range too small for the cluster itself is refused with the definition.)
 */
const givenBack = new Set([
  "StageLinkUnreachable",
  "NodeUnreachable",
  "PortInUse",
  "PortRangeExhausted",
  "RunFolderClaimed",
  "RunFolderUnsafe",
  "RouterConfigUnwritable",
  "RouterUnavailable",
  "StateDirUnwritable",
]);

/** How long the router is given to list its backends before a launch, ms (5 s, as a registration's own request). */
const routerAnswerMs = 5_000;

/** Why the router could not list its backends now (its config does not parse, its admin API does not answer), else undefined. */
async function routerRefusal(registrar: Registrar): Promise<string | undefined> {
  const said = registrar.list().then(
    () => undefined,
    // Its first line: a YAML error goes on with the lines it quotes.
    (error: unknown) => messageOf(error).replace(/:?\s*\n[\s\S]*$/, ""),
  );
  return within(routerAnswerMs, said, `it did not list its backends within ${routerAnswerMs} ms`);
}

/** Room a launch needs on the ledger's disk, KiB (64 KiB): its records there are a few KiB each. */
const ledgerRoomKiB = 64;
/** Room a launch needs on the state directory's disk when its coordinator runs on this machine and logs there, KiB (1 MiB). */
const coordinatorLogRoomKiB = 1024;

/**
 * StateDirUnwritable before anything starts when the ledger's disk has less room than a launch's
 * records, or — for a coordinator on this machine, which logs under the state directory — the state
 * directory's disk less than its first log lines: the launch would run whole (every stage loading
 * the model) and fail at its last record, and so would each try after it. Not counted: the disk is
 * the surroundings. A disk that cannot be asked is passed over: the launch's own
 * writes find out.
 */
async function refuseFullStateDir(ledgerDir: string, stateDir: string, coordinatorHere: boolean): Promise<void> {
  const needs = [{ dir: ledgerDir, kib: ledgerRoomKiB, what: "a launch needs to record itself" }];
  if (coordinatorHere) needs.push({ dir: stateDir, kib: coordinatorLogRoomKiB, what: "a coordinator on this machine needs for its log" });
  for (const { dir, kib, what } of needs) {
    const bytes = await roomLeft(dir, process.getuid?.());
    const room = bytes === undefined ? undefined : Math.floor(bytes / 1024);
    if (room === undefined || room >= kib) continue;
    throw new ShardctlError(
      "StateDirUnwritable",
      `the disk holding ${dir} has ${room} KiB free, less than ${what} (${kib} KiB): nothing was started; free space on that disk (the launch is tried again meanwhile, not counted against the restart budget)`,
    );
  }
}

/** A node that refused the launch files (a folder made read-only, a full or read-only disk): the node's fault, not the cluster's. */
function isNodeWriteFailure(error: LaunchError): boolean {
  return error.reason === "LaunchFilesFailed" && error.step === "launch-files";
}

/** StagesListening while a launch brings its stages up: how many of them listen so far. */
function launchListening(timeline: ReadonlyArray<{ at: string; step: string; detail?: string }>, stages: number) {
  const { listening } = readLaunch(timeline);
  return { status: "False" as const, reason: "Launching" as const, message: `${listening} of ${stages} stages listen; the launch brings them up` };
}

export const launch: Step = {
  name: "launch",
  yieldsToCallOff: true,
  action: "launch",
  failure: "LaunchFailed",
  progress: (pass) => ({
    reason: "Launching",
    // The launch this pass tries: counted once it starts processes (see above).
    message: `launch ${launchCountOf(pass.memory.restarts, pass.revision) + 1} of ${pass.settings.daemon.restartBudget} at this revision`,
    announce: true,
  }),
  async run(pass) {
    const { spec, revision } = definitionOf(pass);
    const { memory, settings, ledger, name, world } = pass;
    const planned = memory.planned;
    const staged = pass.staged;
    if (planned === undefined || staged === undefined) throw new Error("launch step before plan and stage");
    const restarts = memory.restarts ?? (memory.restarts = { revision, count: 0, evidence: [] });
    const request = {
      ...(await buildLaunchRequest(spec, settings, revision, planned.plan, world.nodesOf(spec, settings), staged.modelPaths, world.options.launchDeadlines)),
      identity: planned.identity,
      definitionDigest: definitionDigest(spec),
      owner: world.dir,
      claimant: world.claimant(settings),
      ...(staged.commit === undefined ? {} : { modelCommit: staged.commit }),
    };
    // First: what follows looks at what others hold (see refuse-held.ts) and claims it with nothing
    // awaited in between.
    await refuseFullStateDir(ledger.dir, settings.daemon.stateDir, request.coordinator.nodeName === controlNodeName);
    const others = await othersInLedger(pass);
    // A cluster launching beside this one under the same name holds it as well (it is recorded in
    // the ledger only once registered); taken below, with nothing awaited between look and claim.
    const backend = request.router?.backend;
    refuseTakenBackend(backend, others, world.launchingBackends, name);
    // Its stages' bytes claimed on their nodes, with nothing awaited since the look at the others'
    // (see node-memory.ts): a node's declared memory is shared by every cluster there.
    // Recorded in the ledger: a restarted daemon counts it before it adopts the cluster.
    request.memoryBytes = world.memoryClaims.claim(name, planned.plan, settings, spec.plan.headroom);
    // From here the pass mostly waits (on the router, then on engines to listen, to load, to
    // answer): other clusters' passes must not wait behind it.
    pass.stepAside?.();
    const stages = planned.plan.stages.length;
    const progress = { ring: engineOf(spec.engine.kind).readiness.httpServer === "last-stage" };
    // Counted once its first process is about to start: a launch refused before says nothing of the cluster.
    let counted = false;
    try {
      // Claimed with nothing awaited since the look above; given back in `finally`.
      if (backend !== undefined) world.launchingBackends.set(backend, name);
      // A router config the daemon cannot write in would fail the registration after every process
      // started and loaded: found first, nothing is started (and, as the surroundings, not counted).
      const unwritable = request.router === undefined ? undefined : await world.registrarFor(settings).unwritable?.();
      if (unwritable !== undefined) {
        const { folder, problem } = unwritable;
        const words = `cannot write in ${folder}, the folder of router config ${settings.router.config}: ${problem}; the daemon's user must be able to create files there`;
        throw new LaunchError("RouterConfigUnwritable", "router-registration", words);
      }
      // Nor is a launch run whole into a router that cannot take a registration now (its config
      // does not parse, its admin API does not answer): asked first, nothing is started.
      const refusing = request.router === undefined ? undefined : await routerRefusal(world.registrarFor(settings));
      if (refusing !== undefined) {
        throw new LaunchError("RouterUnavailable", "router-registration", `the router cannot take a registration now: ${refusing}; nothing was started`);
      }
      // Called off while the router was asked: nothing of it is started (the catch below says so).
      pass.callOff?.throwIfAborted();
      memory.timeline = [];
      // Ready says what the pass does now: staging is over, the processes start; each step of the
      // launch then says how far it got.
      setConditions(memory, revision, {
        Ready: notServingYet(memory, "Launching", describeLaunchProgress([], stages, progress)),
        StagesListening: launchListening(memory.timeline, stages),
      });
      await launchCluster(request, {
        ledger,
        // Counted, and the count written, before the first process starts and is recorded in the
        // ledger: a daemon killed once the ledger holds a process of this launch has counted it,
        // and its successor gives it back (see observe.ts); killed before the count, it counted
        // nothing; killed between the two, the launch stays counted (the safe side: one launch less).
        beforeFirstStart: async () => {
          restarts.count += 1;
          counted = true;
          // Stalled says what the daemon does now, no longer what it did before (a teardown, a
          // back-off), unless it stands: an invalid definition stays stalled while its last valid
          // revision relaunches.
          if (!isStalled(memory)) {
            const message = `the daemon is launching this revision (launch ${restarts.count} of ${settings.daemon.restartBudget})`;
            setConditions(memory, revision, { Stalled: { status: "False", reason: "Launching", message } });
          }
          await world.writeStatus(name, memory, { action: "launch", result: "waiting", health: "Progressing" }, settings);
        },
        registrar: world.registrarFor(settings),
        // Read when the ports are chosen, not before: a cluster launching beside this one records
        // its ports in the ledger before this launch chooses (one allocation at a time).
        heldPorts: async () => portsHeldBy(await othersInLedger(pass)),
        // The rule the claim-port step applies, asked again when the ports are chosen.
        httpPortHolder: async (node, host, port) => (await othersInLedger(pass)).find((e) => heldPort(e, { node, host, port }) !== undefined)?.cluster,
        // Each step of the launch reaches the status file (and the dashboard) as it happens: a
        // launch that hangs on a partitioned node shows where, not the previous launch's timeline.
        onEvent: (event) => {
          recordEvent(memory, event);
          world.noteEvent(name, event);
          setConditions(memory, revision, {
            Ready: notServingYet(memory, "Launching", describeLaunchProgress(memory.timeline, stages, progress)),
            StagesListening: launchListening(memory.timeline, stages),
          });
          void world.writeStatus(name, memory, { action: "launch", result: "waiting", health: "Progressing" }, settings);
        },
        onLogTrimmed: (node, file, bytes) => world.noteLogTrimmed(name, node, file, bytes),
        ...(pass.callOff === undefined ? {} : { signal: pass.callOff }),
      });
    } catch (error) {
      // What the launch started is torn down: nothing listens any more, nor holds its nodes' memory.
      clearRuntime(memory, revision);
      world.memoryClaims.release(name);
      if (pass.callOff?.aborted === true && error === pass.callOff.reason) {
        if (counted) restarts.count = Math.max(0, restarts.count - 1);
        return calledOff(memory, revision, "launch", pass.callOff);
      }
      if (error instanceof LaunchError) {
        restarts.evidence = [...restarts.evidence, { at: new Date().toISOString(), reason: error.reason, message: error.message, logTail: error.logTail }].slice(-5);
        // A pipeline that could not form because the network between two of its nodes is down, a
        // process that could not be started because its node fell silent, a port something else
        // holds, or launch files a node refused (a read-only folder or disk), says nothing of the
        // cluster: it is given back to the restart budget, so the cluster comes back by itself once
        // the network, the port or the node does (retried with the pass's back-off, at most a
        // minute apart), rather than stalling after a few launches within seconds.
        const surroundings = givenBack.has(error.reason) || isNodeWriteFailure(error);
        if (counted && surroundings && restarts.count > 0) {
          restarts.count -= 1;
          world.log.info({ cluster: name, reason: error.reason }, "a launch that failed on its surroundings does not count against the restart budget");
        }
        // A failure that is not the surroundings' before any process started (an unforeseen
        // error on the way) counts all the same: uncounted, it would be retried for ever, never Stalled.
        if (!counted && !surroundings) restarts.count += 1;
      }
      throw error;
    } finally {
      // Registered (the ledger holds it now) or given up.
      if (backend !== undefined && world.launchingBackends.get(backend) === name) world.launchingBackends.delete(backend);
    }
    // Registered again: the router's mark is over (the pass's keeper stops renewing it).
    memory.comingBack = undefined;
    const running = await ledger.read(name);
    if (running === undefined) throw new ShardctlError("LedgerMissing", "the launch succeeded but left no ledger entry");
    pass.launched = running;
  },
};
