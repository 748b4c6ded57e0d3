/**
 * The definition is gone: tear down what this daemon launched for it and remove its run folders on
 * the nodes (launch files, token, engine logs: nothing would ever remove them), then the last valid
 * definition the state directory kept and the status file (last, so CI reading it sees the
 * teardown finish). With nothing of ours running there is only what the daemon kept to remove.
 */
import { rm } from "node:fs/promises";
import { dropLastValid } from "../last-valid.js";
import { statusFileFor } from "../status/index.js";
import type { Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import type { Verdict } from "../verdicts.js";
import { removeRunFolders, runFoldersOf } from "./remove-run-folders.js";
import { tearDown } from "./stop.js";

export function prune(forgetMemory: (name: string) => void): Step {
  return {
    name: "prune",
    action: "prune",
    failure: "TeardownFailed",
    async run(pass) {
      const ours = pass.action?.kind === "prune";
      if (ours) await tearDown(pass);
      await removeRunFolders(pass, await runFoldersOf(pass), "a pruned cluster");
      return forget(pass, ours, forgetMemory);
    },
  };
}

async function forget(pass: Pass, tornDown: boolean, forgetMemory: (name: string) => void): Promise<Verdict> {
  await dropLastValid(pass.settings.daemon.stateDir, pass.name);
  await rm(statusFileFor(pass.file), { force: true });
  forgetMemory(pass.name);
  return { action: tornDown ? "prune" : "none", result: "success", health: "Stopped", outcome: { kind: "done" }, pruned: true };
}
