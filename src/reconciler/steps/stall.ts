/**
 * Stall: the decision is to do nothing until something changes; the message says what to change.
 * Whatever runs keeps running unless the decision says it no longer serves.
 */
import { describeInfeasiblePlan } from "../../planner/index.js";
import type { Pass } from "../pass.js";
import type { StallReason } from "../next-action.js";
import type { Step } from "../run-step.js";
import { budgetExhaustedMessage, setConditions, stall as stallVerdict, type Verdict } from "../verdicts.js";
import { watch } from "./supervise.js";
import { findDaemon } from "../daemon-lock.js";

export const stall: Step = {
  name: "stall",
  action: "none",
  failure: "InternalError",
  async run(pass) {
    const action = pass.action;
    if (action?.kind !== "stall") throw new Error(`stall step without a stall decision (${action?.kind})`);
    // What still serves is watched while the daemon waits for a change: after a restart beside an
    // invalid definition (or an emptied directory) no other step would start watching it, and its
    // death would go unseen while the status said Ready.
    const entry = pass.entry;
    if (action.serving && entry?.phase === "running" && pass.observed?.ours === true) watch(pass, entry);
    return stallFor(pass, action.reason, action.serving);
  },
};

async function stallFor(pass: Pass, reason: StallReason, serving: boolean): Promise<Verdict> {
  const { memory, world, name, settings } = pass;
  switch (reason) {
    case "DefinitionsDirMissing": {
      const message = `${world.dir} does not exist; refusing to tear down what it defined until it is back`;
      world.log.warn({ cluster: name }, message);
      return stallVerdict(memory, "prune", reason, message, serving);
    }
    case "MassPruneRefused": {
      const message = `${world.dir} holds the definition of none of the ${pass.observed?.ownEntries ?? 0} clusters that run, nor any valid definition in their place; refusing to tear them all down (set [daemon] allow_mass_prune = true to allow it)`;
      world.log.warn({ cluster: name }, message);
      return stallVerdict(memory, "prune", reason, message, serving);
    }
    case "InvalidDefinition":
      return invalidDefinition(pass, serving, pass.entry?.phase === "running" ? pass.entry.revision : undefined);
    case "ClusterOwnedElsewhere":
      return stallVerdict(memory, "none", reason, await ownedElsewhere(name, pass.entry?.owner ?? "?"), serving);
    case "PlanInfeasible": {
      const errors = memory.planned?.plan.errors ?? [];
      return stallVerdict(memory, "plan", errors[0]?.reason ?? reason, describeInfeasiblePlan(errors), serving);
    }
    case "RestartBudgetExhausted": {
      // The cluster will not come back by itself: the pass's end withdraws the router's promise
      // (503), which then says 404 — a promise an earlier daemon made included.
      memory.comingBack ??= memory.lastGood?.spec.model.id;
      return stallVerdict(memory, "launch", reason, budgetExhaustedMessage(memory, settings.daemon.restartBudget, name), serving);
    }
  }
}

/**
 * The stall of an invalid definition: what is wrong with it (Planned and Stalled say the issues),
 * and which revision serves meanwhile (`servingRevision`), if any. Also how a relaunch of the last
 * valid revision ends once it serves: the definition still needs a fix.
 */
export function invalidDefinition(pass: Pass, serving: boolean, servingRevision: string | undefined): Verdict {
  const { memory } = pass;
  const reason = "InvalidDefinition";
  const issues = pass.desired?.kind === "invalid" ? pass.desired.issues : [];
  const running = servingRevision === undefined ? "" : ` (revision ${servingRevision.slice(0, 12)} keeps serving)`;
  setConditions(memory, memory.lastGood?.revision ?? "", { Planned: { status: "False", reason, message: issues.join("\n") } });
  return stallVerdict(memory, "none", reason, `the definition is invalid${running}:\n${issues.join("\n")}`, serving);
}

/**
 * Why a cluster of this name is another folder's, and what to do: another daemon watches that folder
 * (two daemons share a state_dir), or none does now (this folder may be a copy that replaces it).
 */
async function ownedElsewhere(name: string, owner: string): Promise<string> {
  const other = await findDaemon(owner).catch(() => undefined);
  if (other !== undefined)
    return `a cluster named "${name}" runs from ${owner}, which another shardctl daemon (pid ${other.pid}) watches with the same state_dir; rename this one or give the daemons separate state_dir settings`;
  return `a cluster named "${name}" runs from ${owner}, launched by a daemon with the same state_dir, and no daemon watches that folder now: if this folder replaces it (a copy, a checkout moved), remove or rename ${owner} and this daemon takes the cluster over at its next pass (shardctl reconcile ${name}); otherwise rename this one`;
}
