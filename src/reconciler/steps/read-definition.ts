/**
 * Read the definition: absent (prune), invalid (keep what runs, say what is wrong), or a spec at a
 * revision. A new revision gets a fresh plan and restart budget; `shardctl reconcile` asks for both.
 */
import { entryExists } from "../../files/index.js";
import { formatIssue } from "../../spec/index.js";
import { desiredStateOf } from "../decision-inputs.js";
import type { DesiredState } from "../next-action.js";
import { checkoutHeadOf, lastCommitOf } from "../git-commit.js";
import type { Step } from "../run-step.js";
import { onRevision } from "../verdicts.js";
import type { ParseCache } from "../parse-cache.js";
import { markPlanned } from "./plan.js";
import type { ClusterSpec, Settings } from "../../spec/index.js";

/** What the definition at `file` asks for now: nothing (absent), an invalid file's issues, or a spec at a revision. */
export async function readDesired(
  file: string,
  settings: Settings,
  parsed: ParseCache,
): Promise<{ desired: Exclude<DesiredState, { kind: "defined" }>; spec?: undefined } | { desired: Extract<DesiredState, { kind: "defined" }>; spec: ClusterSpec }> {
  // A symbolic link to nothing is a broken definition (kept running, reported), not a removed one.
  if (!(await entryExists(file))) return { desired: { kind: "absent" } };
  const loaded = await parsed.loadCluster(file, settings);
  if (!loaded.ok) return { desired: { kind: "invalid", issues: loaded.issues.map(formatIssue) } };
  return { desired: desiredStateOf(loaded.value, settings), spec: loaded.value };
}

export function readDefinition(parsed: ParseCache): Step {
  return {
    name: "read",
    action: "none",
    failure: "DefinitionUnreadable",
    async run(pass) {
      const { memory } = pass;
      const read = await readDesired(pass.file, pass.settings, parsed);
      if (read.spec === undefined) {
        pass.desired = read.desired;
        return;
      }
      const { spec, desired } = read;
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
