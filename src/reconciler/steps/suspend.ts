/** `suspend = true`: no action at all, whatever runs or does not. */
import type { Step } from "../run-step.js";
import { settle } from "../verdicts.js";

export const suspend: Step = {
  name: "suspend",
  action: "none",
  failure: "InternalError",
  async run(pass) {
    return settle(pass.memory, "none", "Suspended", "Suspended", "reconciliation is suspended (suspend = true)");
  },
};
