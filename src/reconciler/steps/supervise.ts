/**
 * Watch what runs: the health monitor tears the whole cluster down and deregisters it on the first
 * death (a pipeline cannot survive the loss of a stage), keeps the evidence, withdraws Ready at
 * once and asks for a pass, which relaunches within the restart budget.
 */
import { superviseCluster, type LedgerEntry } from "../../launch/index.js";
import { definitionOf, type Pass } from "../pass.js";
import { completeEvidence, recordDeath, type RestartEvidence } from "../record-death.js";
import type { Step } from "../run-step.js";
import { markRunning } from "../verdicts.js";
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
      evidence = recordDeath(pass, entry, death);
    },
  });
  memory.supervision = { startedAt: entry.startedAt, supervision };
  void supervision.ended.then(async ({ death, teardown }) => {
    await completeEvidence(pass, entry, death.label, evidence);
    // A pass that raced the teardown may have moved on already; one more pass writes the evidence down.
    if (memory.supervision?.supervision !== supervision) return world.options.requeue(entry.cluster);
    delete memory.supervision;
    delete memory.observation;
    if (!teardown.ok) world.log.error({ cluster: entry.cluster, err: teardown.error }, "teardown after a death is incomplete; the next pass retries it");
    world.log.warn({ cluster: entry.cluster, reason: death.reason, detail: death.detail }, "cluster lost a process: deregistered and torn down");
    world.options.requeue(entry.cluster);
  });
}
