/**
 * Read the definition: absent (prune), invalid (say what is wrong, and keep the last valid one), or
 * a spec at a revision. A new revision gets a fresh plan and restart budget, and is kept in the
 * state directory as the last valid definition; `shardctl reconcile` asks for a fresh budget and plan.
 */
import { entryExists } from "../../files/index.js";
import { messageOf } from "../../errors/index.js";
import { formatIssue, parseCluster } from "../../spec/index.js";
import { desiredStateOf } from "../decision-inputs.js";
import { readLastValid, saveLastValid } from "../last-valid.js";
import type { DefinedState, DesiredState } from "../next-action.js";
import type { Pass } from "../pass.js";
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
): Promise<{ desired: Exclude<DesiredState, { kind: "defined" }>; spec?: undefined } | { desired: DefinedState; spec: ClusterSpec; text: string | undefined }> {
  // A symbolic link to nothing is a broken definition (kept running, reported), not a removed one.
  if (!(await entryExists(file))) return { desired: { kind: "absent" } };
  const loaded = await parsed.loadCluster(file, settings);
  if (!loaded.ok) return { desired: { kind: "invalid", issues: loaded.issues.map(formatIssue) } };
  return { desired: desiredStateOf(loaded.value, settings), spec: loaded.value, text: parsed.textOf(file) };
}

export function readDefinition(parsed: ParseCache): Step {
  return {
    name: "read",
    action: "none",
    failure: "DefinitionUnreadable",
    async run(pass) {
      const { memory } = pass;
      const read = await readDesired(pass.file, pass.settings, parsed);
      if (read.desired.kind === "absent") {
        memory.definitionRemoved = true;
        memory.removedSince ??= performance.now();
      } else {
        delete memory.definitionRemoved;
        delete memory.removedSince;
      }
      if (read.spec === undefined) {
        pass.desired = read.desired.kind === "invalid" ? await keepLastValid(pass, read.desired) : read.desired;
        // The checkout's HEAD moves with every pull, a commit that broke the definition included; the
        // commit that last changed the file is the one that broke it, or none while the broken file
        // is not committed (a merge's conflict markers). Looked up again once the file is valid.
        if (read.desired.kind === "invalid") {
          memory.gitHead = await checkoutHeadOf(pass.world.dir, memory.gitHead?.revision ?? "", memory.gitHead);
          memory.gitCommit = { revision: "", commit: await lastCommitOf(pass.file) };
        }
        return;
      }
      const { spec, desired } = read;
      const revision = desired.revision;
      if (memory.lastGood?.revision !== revision) {
        onRevision(memory, revision);
        // Kept for a daemon that starts beside an invalid edit of it; a copy that cannot be written
        // (a full disk) costs only that, not the pass.
        if (read.text !== undefined) {
          await saveLastValid(pass.settings.daemon.stateDir, pass.name, read.text).catch((error: unknown) =>
            pass.world.log.warn({ cluster: pass.name, err: messageOf(error) }, "could not keep the last valid definition in the state directory"),
          );
        }
      }
      memory.lastGood = { spec, revision, ...(read.text === undefined ? {} : { text: read.text }) };
      // Back to a revision already planned (an invalid edit reverted): Planned says its plan again.
      if (memory.planned?.revision === revision) markPlanned(memory, revision, memory.planned.plan);
      takeRetryRequest(memory, revision);
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

/**
 * An invalid definition: the pass carries the last valid one (its spec and revision), which the
 * decision goes on keeping — while today's settings read its text as they did: a settings change
 * that alters or refuses it (a node taken out of the registry) leaves nothing to keep but what runs.
 */
async function keepLastValid(pass: Pass, invalid: Extract<DesiredState, { kind: "invalid" }>): Promise<DesiredState> {
  const remembered = pass.memory.lastGood;
  const lastGood = remembered === undefined ? await recallLastValid(pass) : readsAsBefore(pass, remembered);
  if (lastGood === undefined) return invalid;
  takeRetryRequest(pass.memory, lastGood.revision);
  pass.spec = lastGood.spec;
  pass.revision = lastGood.revision;
  return { ...invalid, lastGood: { kind: "defined", revision: lastGood.revision, desired: lastGood.spec.desired, suspend: lastGood.spec.suspend } };
}

/**
 * A daemon started beside an invalid edit: the last valid definition kept in the state directory,
 * when it is the revision the previous daemon's status file names. A copy older than that (its
 * save failed), one today's settings read as another revision, or one a cluster of the same name
 * left behind is no fallback.
 */
async function recallLastValid(pass: Pass): Promise<LastGood | undefined> {
  const text = await readLastValid(pass.settings.daemon.stateDir, pass.name);
  const kept = text === undefined ? undefined : readDefinitionText(pass, text);
  if (kept === undefined || kept.revision !== pass.memory.status?.observedRevision) return undefined;
  pass.memory.lastGood = kept;
  return kept;
}

/** The remembered last valid definition, while today's settings still read its text as the same revision. */
function readsAsBefore(pass: Pass, lastGood: LastGood): LastGood | undefined {
  return lastGood.text !== undefined && readDefinitionText(pass, lastGood.text)?.revision === lastGood.revision ? lastGood : undefined;
}

/** `text` read as this pass's definition with today's settings: its spec and revision, or undefined when it does not parse. */
function readDefinitionText(pass: Pass, text: string): LastGood | undefined {
  const parsed = parseCluster(text, pass.file, pass.settings);
  return parsed.ok ? { spec: parsed.value, revision: desiredStateOf(parsed.value, pass.settings).revision, text } : undefined;
}

type LastGood = NonNullable<Pass["memory"]["lastGood"]>;

/** `shardctl reconcile <name>`: a fresh restart budget and a fresh look at the model, for `revision`. */
function takeRetryRequest(memory: Pass["memory"], revision: string): void {
  if (memory.retryRequested !== true) return;
  memory.retryRequested = false;
  memory.restarts = { revision, count: 0, evidence: memory.restarts?.evidence ?? [] };
  delete memory.planned;
}
