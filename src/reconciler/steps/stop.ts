/**
 * Nothing should run (`desired = "stopped"`, or distributed serving is off): tear down what does
 * and keep the status file, which says why.
 */
import { teardownCluster } from "../../launch/index.js";
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
  if (mayBeServing(memory)) {
    const revision = revisionOf(pass);
    const message = `tearing down revision ${entry.revision.slice(0, 12)}`;
    setConditions(memory, revision, {
      Ready: { status: "False", reason: "TearingDown", message },
      Reconciling: { status: "True", reason: "TearingDown", message },
    });
    clearRuntime(memory, revision);
    await pass.world.writeStatus(pass.name, memory, { action: "stop", result: "waiting", reason: "TearingDown", health: "Progressing" }, pass.settings);
  }
  await memory.supervision?.supervision.stop();
  delete memory.supervision;
  await teardownCluster(entry, pass.world.teardownContext(pass.settings, pass.ledger, memory));
  delete memory.observation;
}
