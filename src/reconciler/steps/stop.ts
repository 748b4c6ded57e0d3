/**
 * Nothing should run (`desired = "stopped"`, or distributed serving is off): tear down what does
 * and keep the status file, which says why.
 */
import { isShardctlError } from "../../errors/index.js";
import type { ClusterObservation } from "../../health/index.js";
import { processLabel, teardownCluster, type LedgerEntry, type LedgerProcess } from "../../launch/index.js";
import { definitionOf, revisionOf, type Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import { clearRuntime, mayBeServing, setConditions, settle } from "../verdicts.js";

export const stop: Step = {
  name: "stop",
  action: "stop",
  failure: "TeardownFailed",
  async run(pass) {
    const { revision } = definitionOf(pass);
    const action = pass.action;
    if (action?.kind !== "stop") throw new Error(`stop step without a stop decision (${action?.kind})`);
    if (pass.entry !== undefined) await tearDown(pass);
    clearRuntime(pass.memory, revision);
    if (action.why === "Stopped") return settle(pass.memory, pass.entry === undefined ? "none" : "stop", "Stopped", "Stopped", 'desired = "stopped"');
    return settle(
      pass.memory,
      pass.entry === undefined ? "plan" : "stop",
      "Disabled",
      "DistributedDisabled",
      `[distributed] enabled = false in ${pass.settings.file}: planned, nothing staged or launched`,
    );
  },
};

/**
 * Stop watching the cluster, then tear it down (router first, then coordinator, then stages in
 * reverse). A cluster still said to be Ready (or found running, Ready Unknown) is said not to be, in its status file, before anything
 * is stopped: a teardown can wait out grace periods or an unreachable host, and a reader of the file
 * (a CI gate, `shardctl wait`) must not see Ready for a cluster that no longer serves.
 */
export async function tearDown(pass: Pass): Promise<void> {
  const { memory, entry } = pass;
  if (entry === undefined) return;
  // The last look at what runs: the cards of what the teardown may not reach.
  const seen = memory.observation;
  if (mayBeServing(memory)) {
    const revision = revisionOf(pass);
    const message = `tearing down revision ${entry.revision.slice(0, 12)}`;
    setConditions(memory, revision, {
      Ready: { status: "False", reason: "TearingDown", message },
      Reconciling: { status: "True", reason: "TearingDown", message },
    });
    clearRuntime(memory, revision, { message });
    await pass.world.writeStatus(pass.name, memory, { action: "stop", result: "waiting", reason: "TearingDown", health: "Progressing" }, pass.settings);
  }
  await memory.supervision?.supervision.stop();
  delete memory.supervision;
  try {
    await teardownCluster(entry, pass.world.teardownContext(pass.settings, pass.ledger, memory));
    // Nothing of it runs: what it held of its nodes' declared memory is free for others.
    pass.world.memoryClaims.release(pass.name);
  } catch (error) {
    if (isShardctlError(error, "TeardownIncomplete")) await showLeftovers(pass, entry, seen);
    throw error;
  }
  delete memory.observation;
}

/**
 * What a teardown could not stop (its node did not answer, or it survived SIGKILL) may still run:
 * said so, rather than "no stage runs". Its cards stay, liveness unknown, and StagesListening (or
 * CoordinatorHealthy) is Unknown naming them, until a teardown stops them; a router entry it could
 * not remove is Registered Unknown. What it did stop is said not to run.
 */
async function showLeftovers(pass: Pass, entry: LedgerEntry, seen: ClusterObservation | undefined): Promise<void> {
  const { memory } = pass;
  const revision = revisionOf(pass);
  const recorded = await pass.ledger.read(pass.name).catch(() => undefined);
  const left = recorded?.processes ?? [];
  // What was stopped is not running any more; what was not is said below.
  clearRuntime(memory, revision);
  if (recorded?.routerBackend !== undefined) {
    setConditions(memory, revision, {
      Registered: {
        status: "Unknown",
        reason: "TeardownIncomplete",
        message: `backend "${recorded.routerBackend}" could not be removed from the router: it may still route there; removed before anything is launched again`,
      },
    });
  }
  if (left.length === 0) return;
  const named = (p: LedgerProcess): string =>
    `${processLabel(p.role, p.index)} (pid ${p.pid} on ${p.node}) ${p.unreachable === true ? "could not be stopped (its node did not answer)" : "survived SIGKILL"}`;
  const tail = "it may still run, and is stopped before anything is launched there again";
  const stages = left.filter((p) => p.role === "stage");
  const coordinator = left.find((p) => p.role === "coordinator");
  // A card as last seen, else from the plan of what runs (a death's teardown, or a daemon restart, left no look).
  const planned = memory.planned;
  const plannedLayers = planned !== undefined && (planned.revision === entry.revision || planned.identity === entry.identity) ? planned.plan.stages : [];
  const cards = stages.flatMap((p) => {
    const card = seen?.stages.find((c) => c.index === p.index);
    const layers = card?.layers ?? plannedLayers.find((s) => s.index === p.index)?.layers;
    if (layers === undefined) return [];
    return [{ ...card, index: p.index ?? 0, node: p.node, layers, pid: p.pid, alive: false, liveness: "unknown" as const, transport: "unknown" as const }];
  });
  const url = seen?.coordinator?.url ?? entry.coordinatorUrl;
  memory.observation = {
    cluster: pass.name,
    at: new Date().toISOString(),
    health: "Unhealthy",
    stages: cards,
    ...(coordinator === undefined || url === undefined ? {} : { coordinator: { node: coordinator.node, url, pid: coordinator.pid, health: "unknown" as const } }),
    problems: [],
    gone: [],
  };
  setConditions(memory, revision, {
    ...(stages.length === 0 ? {} : { StagesListening: { status: "Unknown", reason: "TeardownIncomplete", message: `${stages.map(named).join(", ")}: ${tail}` } }),
    ...(coordinator === undefined ? {} : { CoordinatorHealthy: { status: "Unknown", reason: "TeardownIncomplete", message: `${named(coordinator)}: ${tail}` } }),
  });
}
