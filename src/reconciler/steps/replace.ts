/**
 * Tear down what runs at another launch identity, broken, or left half-launched or half-torn-down,
 * before launching (or before stalling on an exhausted restart budget). Ready is withdrawn first.
 */
import { definitionOf } from "../pass.js";
import type { Step } from "../run-step.js";
import { clearRuntime, setConditions } from "../verdicts.js";
import { tearDown } from "./stop.js";

export const replace: Step = {
  name: "replace",
  action: "stop",
  failure: "TeardownFailed",
  async run(pass) {
    const { revision } = definitionOf(pass);
    const entry = pass.entry;
    if (entry === undefined) return;
    const gone = pass.observed?.gone ?? [];
    setConditions(pass.memory, revision, {
      Ready: {
        status: "False",
        reason: "Replacing",
        message: `tearing down revision ${entry.revision.slice(0, 12)} (${entry.phase}${gone.length > 0 ? `; ${gone.join(", ")} gone` : ""})`,
      },
    });
    await tearDown(pass);
    clearRuntime(pass.memory, revision);
  },
};
