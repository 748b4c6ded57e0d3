/**
 * The definition is gone: tear down what this daemon launched for it and remove its run folders on
 * the nodes (launch files, token, engine logs: nothing would ever remove them), then the last valid
 * definition the state directory kept and the status file (last, so CI reading it sees the
 * teardown finish). With nothing of ours running there is only what the daemon kept to remove.
 */
import { rm } from "node:fs/promises";
import { within } from "../../nodes/index.js";
import { dropLastValid } from "../last-valid.js";
import { statusFileFor } from "../status/index.js";
import type { Pass } from "../pass.js";
import type { Step } from "../run-step.js";
import type { Verdict } from "../verdicts.js";
import { tearDown } from "./stop.js";

export function prune(forgetMemory: (name: string) => void): Step {
  return {
    name: "prune",
    action: "prune",
    failure: "TeardownFailed",
    async run(pass) {
      const ours = pass.action?.kind === "prune";
      if (ours) {
        await tearDown(pass);
        await removeRunFolders(pass);
      }
      return forget(pass, ours, forgetMemory);
    },
  };
}

/** Each node's run folder of the torn-down launch; one that cannot be removed (a silent node) is logged and left. */
async function removeRunFolders(pass: Pass): Promise<void> {
  const { entry } = pass;
  if (entry === undefined) return;
  const folders = new Map(entry.processes.map((p) => [`${p.node}\0${p.runDir}`, { node: p.node, dir: p.runDir }]));
  await Promise.all(
    [...folders.values()].map(async ({ node, dir }) => {
      const removed = await within(
        10_000,
        pass.world
          .nodeFor(node, pass.settings)
          .remove(dir)
          .then(() => true),
        false,
      );
      if (!removed)
        pass.world.log.warn(
          { cluster: pass.name, node, dir },
          "the run folder of a pruned cluster was not removed within 10 s (the node did not answer, or refused): what is left of it stays",
        );
    }),
  );
}

async function forget(pass: Pass, tornDown: boolean, forgetMemory: (name: string) => void): Promise<Verdict> {
  await dropLastValid(pass.settings.daemon.stateDir, pass.name);
  await rm(statusFileFor(pass.file), { force: true });
  forgetMemory(pass.name);
  return { action: tornDown ? "prune" : "none", result: "success", health: "Stopped", outcome: { kind: "done" }, pruned: true };
}
