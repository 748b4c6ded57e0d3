/**
 * Count the launch about to start against the revision's restart budget (`[daemon]
 * restart_budget`, default 3). The decision has already stalled a revision whose budget is spent;
 * the count survives a daemon restart through the status file.
 */
import { definitionOf } from "../pass.js";
import type { Step } from "../run-step.js";

export const budget: Step = {
  name: "budget",
  yieldsToCallOff: true,
  action: "launch",
  failure: "InternalError",
  async run(pass) {
    const { revision } = definitionOf(pass);
    const restarts = pass.memory.restarts ?? (pass.memory.restarts = { revision, count: 0, evidence: [] });
    restarts.count += 1;
  },
};
