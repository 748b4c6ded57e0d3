/**
 * Read the definition: absent (prune), invalid (keep what runs, say what is wrong), or a spec at a
 * revision. A new revision gets a fresh plan and restart budget; `shardctl reconcile` asks for both.
 */
import { pathExists } from "../../files/index.js";
import { computeRevision, formatIssue } from "../../spec/index.js";
import { lastCommitOf } from "../git-commit.js";
import type { Step } from "../run-step.js";
import { onRevision } from "../verdicts.js";
import type { ParseCache } from "../parse-cache.js";

export function readDefinition(parsed: ParseCache): Step {
  return {
    name: "read",
    action: "none",
    failure: "DefinitionUnreadable",
    async run(pass) {
      const { memory } = pass;
      if (!(await pathExists(pass.file))) {
        pass.desired = { kind: "absent" };
        return;
      }
      const loaded = await parsed.loadCluster(pass.file, pass.settings);
      if (!loaded.ok) {
        pass.desired = { kind: "invalid", issues: loaded.issues.map(formatIssue) };
        return;
      }
      const spec = loaded.value;
      const revision = computeRevision(spec, pass.settings);
      if (memory.lastGood?.revision !== revision) onRevision(memory, revision);
      memory.lastGood = { spec, revision };
      if (memory.retryRequested === true) {
        // `shardctl reconcile <name>`: a fresh restart budget and a fresh look at the model.
        memory.retryRequested = false;
        memory.restarts = { revision, count: 0, evidence: memory.restarts?.evidence ?? [] };
        delete memory.planned;
      }
      if (memory.gitCommit?.revision !== revision) memory.gitCommit = { revision, commit: await lastCommitOf(pass.file) };
      pass.spec = spec;
      pass.revision = revision;
      pass.desired = { kind: "defined", revision, desired: spec.desired, suspend: spec.suspend };
    },
  };
}
