/**
 * Plan the revision (once: the plan is remembered until the revision changes). With distributed
 * serving on, the daemon budgets with what the nodes report and pins a Hub branch to its commit,
 * since it is about to stage; off, it plans from the registry alone and touches no node.
 */
import { daemonPlanOptions, planForCluster, type PlannedCluster } from "../../cluster/index.js";
import { identifyPlan } from "../decision-inputs.js";
import { definitionOf, type Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import { mayBeServing, setConditions } from "../verdicts.js";

export const plan: Step = {
  name: "plan",
  action: "plan",
  failure: "PlanFailed",
  // Said in the status file when nothing runs: a cluster new to the daemon has a status at once,
  // not only once its nodes answered (an engine's version command may take 30 s). One that runs
  // keeps its last word (a restarted daemon's first pass plans it too) until the pass has looked.
  progress: (pass) => ({
    reason: "Planning",
    message: "planning: reading the model and probing the nodes",
    announce: pass.entry === undefined && !mayBeServing(pass.memory),
  }),
  async run(pass) {
    const { spec, revision } = definitionOf(pass);
    const { settings, memory } = pass;
    // Planning waits on the nodes (their probes and the engine's version command, 30 s at most) and
    // on the model's source: other clusters' passes (a delete, a relaunch) must not wait behind it.
    pass.stepAside?.();
    // Called off (the daemon stopping, the definition changed), its probes end at once.
    const options = daemonPlanOptions(settings, () => pass.world.nodesOf(spec, settings), { pin: true });
    const planned = await planForCluster(spec, settings, pass.callOff === undefined ? options : { ...options, signal: pass.callOff });
    memory.planned = identifyPlan(spec, settings, revision, planned);
    markPlanned(memory, revision, planned.plan);
  },
};

/** The Planned condition of a revision's plan (set again when the definition returns to a planned revision). */
export function markPlanned(memory: Pass["memory"], revision: string, shard: PlannedCluster["plan"]): void {
  setConditions(memory, revision, {
    Planned: shard.feasible
      ? { status: "True", reason: "PlanFeasible", message: `${shard.stages.length} stages over ${shard.model.layers} layers (${shard.splitUsed} split)` }
      : { status: "False", reason: shard.errors[0]?.reason ?? "PlanInfeasible", message: shard.errors.map((e) => e.message).join("; ") },
  });
}
