/**
 * Watch what runs: the health monitor tears the whole cluster down and deregisters it on the first
 * death (a pipeline cannot survive the loss of a stage), keeps the evidence, withdraws Ready at
 * once and asks for a pass, which relaunches within the restart budget.
 */
import { describeExit, processLabel, readLogTail, superviseCluster, type LedgerEntry } from "../../launch/index.js";
import type { DeathEvent } from "../../health/index.js";
import type { ClusterMemory } from "../cluster-memory.js";
import { defaultRelaunchMarkMs } from "../../router/index.js";
import { definitionOf, type Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import { clearRuntime, markRunning, setConditions } from "../verdicts.js";
import { observeEntry } from "./observe.js";

/** The last step of a launch: watch the new processes and say the cluster is Ready. */
export const supervise: Step = {
  name: "supervise",
  action: "launch",
  failure: "ObserveFailed",
  async run(pass) {
    const { revision } = definitionOf(pass);
    const running = pass.launched;
    if (running === undefined) throw new Error("supervise step without a launch");
    watch(pass, running);
    await observeEntry(pass, running);
    markRunning(pass.memory, revision, running, "Healthy");
    return { action: "launch", result: "success", health: "Healthy", outcome: { kind: "done" } };
  },
};

/**
 * Start supervising `entry`, unless this launch is already watched. A death is recorded the moment
 * it is detected — Ready withdrawn, the cause (the first process that died) kept as evidence, the
 * status file written — before the teardown runs, so neither a reader of the file nor a pass that
 * races the teardown ever misses it. The log tail and exit status are added once the teardown ended.
 */
export function watch(pass: Pass, entry: LedgerEntry): void {
  const { memory, world, settings, ledger } = pass;
  if (memory.supervision !== undefined && memory.supervision.startedAt === entry.startedAt) return;
  void memory.supervision?.supervision.stop();
  let evidence: RestartEvidence | undefined;
  const supervision = superviseCluster(entry, {
    ...world.teardownContext(settings, ledger, memory),
    monitor: {
      ...(world.options.monitor ?? {}),
      ...(memory.planned === undefined ? {} : { layers: memory.planned.plan.stages.map((s) => s.layers) }),
    },
    onDeath: (death) => {
      markRelaunching(pass, entry);
      evidence = recordDeath(pass, entry, death);
    },
  });
  memory.supervision = { startedAt: entry.startedAt, supervision };
  void supervision.ended.then(async ({ death, teardown }) => {
    const { logTail, exit } = await deathEvidence(pass, entry, death.label);
    if (evidence !== undefined) {
      evidence.logTail = logTail;
      if (exit !== undefined) evidence.message = `${evidence.message} (${exit})`;
    }
    // A pass that raced the teardown may have moved on already; one more pass writes the evidence down.
    if (memory.supervision?.supervision !== supervision) return world.options.requeue(entry.cluster);
    delete memory.supervision;
    delete memory.observation;
    if (!teardown.ok) world.log.error({ cluster: entry.cluster, err: teardown.error }, "teardown after a death is incomplete; the next pass retries it");
    world.log.warn({ cluster: entry.cluster, reason: death.reason, detail: death.detail }, "cluster lost a process: deregistered and torn down");
    world.options.requeue(entry.cluster);
  });
}

/**
 * While a registered cluster is torn down and relaunched, the router answers its model with 503 and
 * Retry-After (clients retry) instead of 404 (they give up). Marked synchronously, before the
 * teardown deregisters the backend, and only when the restart budget has a launch left.
 */
function markRelaunching(pass: Pass, entry: LedgerEntry): void {
  const { memory, world, settings } = pass;
  const model = memory.lastGood?.spec.model.id;
  const relaunches = memory.restarts === undefined || memory.restarts.count < settings.daemon.restartBudget;
  if (entry.routerBackend === undefined || model === undefined || !relaunches) return;
  void world
    .registrarFor(settings)
    .markRelaunching(model, Date.now() + defaultRelaunchMarkMs)
    .catch((error: unknown) => world.log.warn({ cluster: entry.cluster, err: error }, "could not mark the model as relaunching"));
}

type RestartEvidence = NonNullable<ClusterMemory["restarts"]>["evidence"][number];

/** Say at once what died: Ready=False with the cause, the evidence, the status file. Returns the evidence to complete later. */
function recordDeath(pass: Pass, entry: LedgerEntry, death: DeathEvent): RestartEvidence | undefined {
  const { memory, world, settings } = pass;
  const message = `${death.label} on ${death.node}: ${death.detail}`;
  const evidence: RestartEvidence = { at: death.at, reason: death.reason, message, logTail: [] };
  if (memory.restarts !== undefined) memory.restarts.evidence = [...memory.restarts.evidence, evidence].slice(-5);
  memory.lastError = { reason: death.reason, message, at: death.at };
  const revision = memory.lastGood?.revision ?? entry.revision;
  setConditions(memory, revision, {
    Ready: { status: "False", reason: death.reason, message },
    Reconciling: { status: "True", reason: "TearingDown", message: `tearing the cluster down after ${message}` },
  });
  clearRuntime(memory, revision);
  void world.writeStatus(entry.cluster, memory, { action: "none", result: "waiting", reason: death.reason, health: "Unhealthy" }, settings);
  return memory.restarts === undefined ? undefined : evidence;
}

/** The dead process's last log lines and how it ended (exit status or signal, from its wrapper). */
async function deathEvidence(pass: Pass, entry: LedgerEntry, label: string): Promise<{ logTail: string[]; exit?: string }> {
  const process = entry.processes.find((p) => processLabel(p.role, p.index) === label);
  if (process === undefined) return { logTail: [] };
  const node = pass.world.nodeFor(process.node, pass.settings);
  const [logTail, exit] = await Promise.all([readLogTail(node, process).catch(() => []), describeExit(node, process).catch(() => undefined)]);
  return { logTail, ...(exit === undefined ? {} : { exit }) };
}
