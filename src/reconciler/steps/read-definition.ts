/**
 * Read the definition: absent (prune), invalid (keep what runs, say what is wrong), or a spec at a
 * revision. A new revision gets a fresh plan and restart budget; `shardctl reconcile` asks for both.
 */
import { entryExists } from "../../files/index.js";
import { formatIssue } from "../../spec/index.js";
import { desiredStateOf } from "../decision-inputs.js";
import { checkoutHeadOf, lastCommitOf } from "../git-commit.js";
import type { Step } from "../run-step.js";
import { onRevision } from "../verdicts.js";
import type { ParseCache } from "../parse-cache.js";
import { markPlanned } from "./plan.js";

export function readDefinition(parsed: ParseCache): Step {
  return {
    name: "read",
    action: "none",
    failure: "DefinitionUnreadable",
    async run(pass) {
      const { memory } = pass;
      // A symbolic link to nothing is a broken definition (kept running, reported), not a removed one.
      if (!(await entryExists(pass.file))) {
        pass.desired = { kind: "absent" };
        return;
      }
      const loaded = await parsed.loadCluster(pass.file, pass.settings);
      if (!loaded.ok) {
        pass.desired = { kind: "invalid", issues: loaded.issues.map(formatIssue) };
        return;
      }
      const spec = loaded.value;
      const desired = desiredStateOf(spec, pass.settings);
      const revision = desired.revision;
      if (memory.lastGood?.revision !== revision) onRevision(memory, revision);
      memory.lastGood = { spec, revision };
      // Back to a revision already planned (an invalid edit reverted): Planned says its plan again.
      if (memory.planned?.revision === revision) markPlanned(memory, revision, memory.planned.plan);
      if (memory.retryRequested === true) {
        // `shardctl reconcile <name>`: a fresh restart budget and a fresh look at the model.
        memory.retryRequested = false;
        memory.restarts = { revision, count: 0, evidence: memory.restarts?.evidence ?? [] };
        delete memory.planned;
      }
      // The checkout's HEAD, once per revision and again whenever HEAD moves; the commit that last
      // changed the file, once per revision and again when HEAD moved (the file may have been
      // committed as it already was on disk, which changes no revision).
      const head = await checkoutHeadOf(pass.world.dir, revision, memory.gitHead);
      if (memory.gitCommit?.revision !== revision || head.commit !== memory.gitHead?.commit) memory.gitCommit = { revision, commit: await lastCommitOf(pass.file) };
      memory.gitHead = head;
      pass.spec = spec;
      pass.revision = revision;
      pass.desired = desired;
    },
  };
}
